// SPDX-License-Identifier: Apache-2.0
// Tests of the attention family: inference checks and the ref kernels on cases whose results follow
// from the definitions (uniform attention averages the visible values, rotations by 90 degrees).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {
namespace {

// Runs `op` with the given inputs (nullopt: an omitted optional input) on the ref interpreter and
// returns its `num_outputs` outputs.
Result<std::vector<Tensor>> run_op(Op op, const std::vector<std::optional<Tensor>>& inputs,
                                   int num_outputs = 1) {
  Graph g("t");
  GraphBuilder b(g);
  std::vector<Value*> values;
  std::vector<Argument> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      values.push_back(nullptr);
      continue;
    }
    values.push_back(
        b.input("x" + std::to_string(i), TensorType(inputs[i]->dtype(), inputs[i]->shape())));
    args.emplace_back(*inputs[i]);
  }
  for (Value* out : b.add(std::move(op), values, num_outputs, "n")) b.output(out);
  KILN_RETURN_IF_ERROR(b.status());
  ref::Interpreter interpreter;
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> out, interpreter.run(g, std::move(args)));
  std::vector<Tensor> tensors;
  for (Argument& a : out) tensors.push_back(a.tensor());
  return tensors;
}

std::vector<float> floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

Tensor f32(std::vector<float> values, Shape shape) {
  return Tensor::from_vector<float>(values).reshaped(std::move(shape));
}

Tensor random_f32(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (float& x : v) x = dist(rng);
  return f32(std::move(v), std::move(shape));
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// With Q = 0 every visible key scores the same, so each output row is the mean of the visible
// values: the causal frontier sits `past` keys to the right.
TEST(AttentionRef, CausalWithPastAveragesTheVisibleValues) {
  ops::Attention op;
  op.is_causal = 1;
  const Tensor q = f32({0, 0, 0, 0}, Shape{1, 1, 2, 2});
  const Tensor k = random_f32(Shape{1, 1, 2, 2}, 1);
  const Tensor past_k = random_f32(Shape{1, 1, 3, 2}, 2);
  const Tensor v = f32({40, 4, 50, 5}, Shape{1, 1, 2, 2});
  const Tensor past_v = f32({10, 1, 20, 2, 30, 3}, Shape{1, 1, 3, 2});
  auto out = run_op(op, {q, k, v, std::nullopt, past_k, past_v}, 3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // Row 0 sees keys 0..3, row 1 keys 0..4.
  expect_near(floats((*out)[0]), {25, 2.5f, 30, 3});
  EXPECT_EQ((*out)[1].shape(), (Shape{1, 1, 5, 2}));
  const std::vector<float> present_v = floats((*out)[2]);
  EXPECT_EQ(present_v, (std::vector<float>{10, 1, 20, 2, 30, 3, 40, 4, 50, 5}));
  std::vector<float> present_k = floats((*out)[1]);
  EXPECT_EQ(std::vector<float>(present_k.begin(), present_k.begin() + 6), floats(past_k));
  EXPECT_EQ(std::vector<float>(present_k.begin() + 6, present_k.end()), floats(k));
}

TEST(AttentionRef, GroupedQueryHeadsShareTheirKeyValueHead) {
  const Tensor q(DType::kF32, Shape{1, 4, 1, 1});
  const Tensor k = random_f32(Shape{1, 2, 3, 1}, 3);
  const Tensor v = f32({1, 2, 3, 10, 20, 30}, Shape{1, 2, 3, 1});
  auto out = run_op(ops::Attention{}, {q, k, v});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(floats((*out)[0]), {2, 2, 20, 20});
}

TEST(AttentionRef, PackedInputsMatchHeadMajorOnes) {
  // [batch 2, heads 2, length 3, size 4] and the same values packed as [2, 3, 2 * 4].
  const Tensor q = random_f32(Shape{2, 2, 3, 4}, 4);
  const Tensor k = random_f32(Shape{2, 2, 5, 4}, 5);
  const Tensor v = random_f32(Shape{2, 2, 5, 4}, 6);
  auto pack = [](const Tensor& t) {
    const Shape& s = t.shape();
    std::vector<float> out(static_cast<size_t>(t.numel()));
    const float* in = t.data<float>();
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t l = 0; l < s[2]; ++l)
          for (int64_t d = 0; d < s[3]; ++d)
            out[static_cast<size_t>(((b * s[2] + l) * s[1] + h) * s[3] + d)] =
                in[((b * s[1] + h) * s[2] + l) * s[3] + d];
    return f32(std::move(out), Shape{s[0], s[2], s[1] * s[3]});
  };
  ops::Attention head_major;
  head_major.scale = 0.3f;
  auto four = run_op(head_major, {q, k, v});
  ops::Attention packed = head_major;
  packed.q_num_heads = 2;
  packed.kv_num_heads = 2;
  auto three = run_op(packed, {pack(q), pack(k), pack(v)});
  ASSERT_TRUE(four.ok()) << four.status().to_string();
  ASSERT_TRUE(three.ok()) << three.status().to_string();
  EXPECT_EQ((*three)[0].shape(), (Shape{2, 3, 8}));
  expect_near(floats((*three)[0]), floats(pack((*four)[0])));
}

TEST(AttentionRef, AFullyMaskedRowIsZero) {
  ops::Attention op;
  op.qk_matmul_output_mode = 3;
  const Tensor q = random_f32(Shape{1, 1, 2, 2}, 7);
  const Tensor k = random_f32(Shape{1, 1, 2, 2}, 8);
  const Tensor v = f32({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  Tensor mask(DType::kBool, Shape{2, 2});
  mask.data<bool>()[0] = mask.data<bool>()[1] = true;  // row 1 stays all false
  auto out = run_op(op, {q, k, v, mask}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> y = floats((*out)[0]);
  const std::vector<float> probs = floats((*out)[3]);
  EXPECT_NEAR(probs[0] + probs[1], 1.0f, 1e-6f);
  EXPECT_EQ(probs[2], 0.0f);
  EXPECT_EQ(probs[3], 0.0f);
  EXPECT_NEAR(y[0], probs[0] * 1 + probs[1] * 3, 1e-5f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(AttentionRef, NonpadLengthsHideThePaddedKeys) {
  const Tensor q(DType::kF32, Shape{2, 1, 1, 1});
  const Tensor k = random_f32(Shape{2, 1, 4, 1}, 9);
  const Tensor v = f32({1, 2, 3, 100, 4, 5, 100, 100}, Shape{2, 1, 4, 1});
  const Tensor nonpad = Tensor::from_vector<int64_t>({3, 2});
  auto out = run_op(ops::Attention{}, {q, k, v, std::nullopt, std::nullopt, std::nullopt, nonpad});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(floats((*out)[0]), {2, 4.5f});
}

TEST(AttentionRef, SlidingWindowLimitsTheKeysBehind) {
  ops::Attention op;
  op.is_causal = 1;
  op.left_window_size = 1;
  const Tensor q(DType::kF32, Shape{1, 1, 3, 1});
  const Tensor k = random_f32(Shape{1, 1, 3, 1}, 10);
  const Tensor v = f32({2, 4, 8}, Shape{1, 1, 3, 1});
  auto out = run_op(op, {q, k, v});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(floats((*out)[0]), {2, 3, 6});
}

TEST(AttentionRef, QkOutputModesTapTheScoresInTurn) {
  const Tensor q = random_f32(Shape{1, 1, 2, 3}, 11);
  const Tensor k = random_f32(Shape{1, 1, 2, 3}, 12);
  const Tensor v = random_f32(Shape{1, 1, 2, 3}, 13);
  const Tensor mask = f32({0.5f, -1, 2, 0}, Shape{2, 2});
  const float cap = 0.2f;
  std::vector<std::vector<float>> taps;
  for (int64_t mode = 0; mode < 3; ++mode) {
    ops::Attention op;
    op.softcap = cap;
    op.qk_matmul_output_mode = mode;
    auto out = run_op(op, {q, k, v, mask}, 4);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    taps.push_back(floats((*out)[3]));
  }
  const float* qd = q.data<float>();
  const float* kd = k.data<float>();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      double dot = 0;
      for (int d = 0; d < 3; ++d) dot += qd[i * 3 + d] * kd[j * 3 + d];
      dot /= std::sqrt(3.0);
      const size_t at = static_cast<size_t>(i * 2 + j);
      EXPECT_NEAR(taps[0][at], dot, 1e-5) << at;
      EXPECT_NEAR(taps[1][at], cap * std::tanh(dot / cap), 1e-5) << at;
      EXPECT_NEAR(taps[2][at], cap * std::tanh(dot / cap) + mask.data<float>()[at], 1e-5) << at;
    }
  }
}

TEST(AttentionInfer, RejectsInconsistentInputs) {
  const Tensor q3 = random_f32(Shape{1, 2, 8}, 14);
  auto no_heads = run_op(ops::Attention{}, {q3, q3, q3});
  ASSERT_FALSE(no_heads.ok());
  EXPECT_NE(no_heads.status().message().find("q_num_heads"), std::string::npos);

  const Tensor q = random_f32(Shape{1, 3, 2, 4}, 15);
  const Tensor kv = random_f32(Shape{1, 2, 2, 4}, 16);
  auto heads = run_op(ops::Attention{}, {q, kv, kv});
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("multiple"), std::string::npos);

  const Tensor k = random_f32(Shape{1, 3, 2, 4}, 17);
  auto lonely_past = run_op(ops::Attention{}, {q, k, k, std::nullopt, k});
  ASSERT_FALSE(lonely_past.ok());
  EXPECT_NE(lonely_past.status().message().find("together"), std::string::npos);

  const Tensor long_mask(DType::kBool, Shape{2, 3});
  auto mask = run_op(ops::Attention{}, {q, k, k, long_mask});
  ASSERT_FALSE(mask.ok());
  EXPECT_NE(mask.status().message().find("longer"), std::string::npos);
}

TEST(RMSNormalizationRef, DividesByTheRootMeanSquare) {
  ops::RMSNormalization op;
  op.epsilon = 0.0f;
  auto out = run_op(op, {f32({3, 4, 0, -2}, Shape{2, 2}), f32({1, 2}, Shape{2})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float r0 = std::sqrt(12.5f), r1 = std::sqrt(2.0f);
  expect_near(floats((*out)[0]), {3 / r0, 8 / r0, 0, -4 / r1});
}

TEST(RotaryEmbeddingRef, RotatesHalvesOrNeighboursByTheCachedAngle) {
  // A rotation by 90 degrees: (x1, x2) -> (-x2, x1).
  const Tensor x = f32({1, 2, 3, 4}, Shape{1, 1, 1, 4});
  const Tensor cos = f32({0, 0}, Shape{1, 1, 2});
  const Tensor sin = f32({1, 1}, Shape{1, 1, 2});
  auto halves = run_op(ops::RotaryEmbedding{}, {x, cos, sin});
  ASSERT_TRUE(halves.ok()) << halves.status().to_string();
  expect_near(floats((*halves)[0]), {-3, -4, 1, 2});
  ops::RotaryEmbedding interleaved;
  interleaved.interleaved = 1;
  auto pairs = run_op(interleaved, {x, cos, sin});
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  expect_near(floats((*pairs)[0]), {-2, 1, -4, 3});
  // Partial rotation of the first 2 values, the angle picked by position id 1 of 2 (0 and 90 deg).
  ops::RotaryEmbedding partial;
  partial.rotary_embedding_dim = 2;
  auto part = run_op(partial, {x, f32({1, 0}, Shape{2, 1}), f32({0, 1}, Shape{2, 1}),
                               Tensor::from_vector<int64_t>({1}).reshaped(Shape{1, 1})});
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  expect_near(floats((*part)[0]), {-2, 1, 3, 4});
}

TEST(LinearAttentionRef, FollowsEachUpdateRule) {
  // One head, d_k = d_v = 1, two tokens, scale 1: the state is a number.
  const Tensor q = f32({1, 1}, Shape{1, 2, 1});
  const Tensor k = f32({1, 2}, Shape{1, 2, 1});
  const Tensor v = f32({3, 5}, Shape{1, 2, 1});
  const Tensor half = f32({std::log(0.5f), std::log(0.5f)}, Shape{1, 2, 1});
  const Tensor one = f32({1, 1}, Shape{1, 2, 1});
  ops::LinearAttention op;
  op.q_num_heads = 1;
  op.kv_num_heads = 1;
  op.scale = 1.0f;
  struct Case {
    std::string rule;
    std::optional<Tensor> decay, beta;
    std::vector<float> output;
  };
  const Case cases[] = {
      {"linear", std::nullopt, std::nullopt, {3, 13}},  // S = 3, then 3 + 2 * 5
      {"gated", half, std::nullopt, {3, 11.5f}},        // S = 3, then 1.5 + 10
      {"delta", std::nullopt, one, {3, 1}},             // S = 3, then 3 + 2 * (5 - 3 * 2)
      {"gated_delta", half, one, {3, 5.5f}},            // S = 3, then 1.5 + 2 * (5 - 1.5 * 2)
  };
  for (const Case& c : cases) {
    op.update_rule = c.rule;
    auto out = run_op(op, {q, k, v, std::nullopt, c.decay, c.beta}, 2);
    ASSERT_TRUE(out.ok()) << c.rule << ": " << out.status().to_string();
    expect_near(floats((*out)[0]), c.output);
    EXPECT_NEAR(floats((*out)[1])[0], floats((*out)[0])[1], 1e-6f) << c.rule;
  }
  op.update_rule = "gated";
  auto missing = run_op(op, {q, k, v}, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("decay"), std::string::npos);
}

TEST(CausalConvWithStateRef, CarriedStateContinuesTheSequence) {
  const Tensor x = random_f32(Shape{2, 3, 5}, 18);
  const Tensor w = random_f32(Shape{3, 1, 3}, 19);
  const Tensor bias = random_f32(Shape{3}, 20);
  ops::CausalConvWithState op;
  op.activation = "silu";
  auto whole = run_op(op, {x, w, bias}, 2);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  // The same sequence in two calls, the first's state carried into the second.
  std::vector<float> first, second;
  const float* xd = x.data<float>();
  for (int64_t bc = 0; bc < 6; ++bc) {
    first.insert(first.end(), xd + bc * 5, xd + bc * 5 + 3);
    second.insert(second.end(), xd + bc * 5 + 3, xd + bc * 5 + 5);
  }
  auto a = run_op(op, {f32(first, Shape{2, 3, 3}), w, bias}, 2);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = run_op(op, {f32(second, Shape{2, 3, 2}), w, bias, (*a)[1]}, 2);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const std::vector<float> y = floats((*whole)[0]), ya = floats((*a)[0]), yb = floats((*b)[0]);
  for (int64_t bc = 0; bc < 6; ++bc) {
    for (int64_t t = 0; t < 5; ++t) {
      const float split =
          t < 3 ? ya[static_cast<size_t>(bc * 3 + t)] : yb[static_cast<size_t>(bc * 2 + t - 3)];
      EXPECT_NEAR(y[static_cast<size_t>(bc * 5 + t)], split, 1e-6f) << bc << "," << t;
    }
  }
  expect_near(floats((*b)[1]), floats((*whole)[1]));
}

TEST(TensorScatterRef, CircularWritesWrapAndLinearOnesMustFit) {
  const Tensor cache(DType::kF32, Shape{1, 4, 1});
  const Tensor update = f32({1, 2, 3}, Shape{1, 3, 1});
  const Tensor at = Tensor::from_vector<int64_t>({3});
  ops::TensorScatter circular;
  circular.axis = 1;
  circular.mode = "circular";
  auto out = run_op(circular, {cache, update, at});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{2, 3, 0, 1}));
  ops::TensorScatter linear;
  linear.axis = 1;
  auto overflow = run_op(linear, {cache, update, at});
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("outside the 4 cache slots"), std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler
