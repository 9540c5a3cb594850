// SPDX-License-Identifier: Apache-2.0
// The cpu target's planned execution: whole networks agree with ref, fused steps and blocked
// layouts actually happen, buffers are reused without overlapping, and concurrent runs are safe.
#include "compiler/targets/cpu/program.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/builder.h"
#include "compiler/ir/clone.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/quantize/quantize.h"
#include "compiler/runtime/shape_profiles.h"
#include "compiler/targets/cpu/cpu_target.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "compiler/targets/cpu/packed_constants.h"
#include "compiler/targets/cpu/silu.h"
#include "core/testing/scoped_env.h"

namespace kiln::compiler {
namespace {

Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// Values in [0.5, 1.5): a variance.
Tensor positive_tensor(Shape shape, uint32_t seed) {
  Tensor t = random_tensor(std::move(shape), seed, 0.5f);
  for (float& v : t.span<float>()) v += 1.0f;
  return t;
}

std::shared_ptr<Executable> compile_for(const std::shared_ptr<Graph>& graph, const char* name) {
  auto target = make_target(name);
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  auto exe = compile(graph, **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? *exe : nullptr;
}

std::vector<Tensor> run(const Executable& exe, const std::vector<Tensor>& inputs) {
  std::vector<Argument> args(inputs.begin(), inputs.end());
  auto out = exe.run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<Tensor> tensors;
  if (out.ok()) {
    for (const Argument& a : *out) tensors.push_back(a.tensor());
  }
  return tensors;
}

// Every element within 1e-4 absolute plus `rtol` relative.
void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                  float rtol = 1e-4f) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    ASSERT_EQ(want[o].dtype(), got[o].dtype()) << "output " << o;
    if (want[o].dtype() != DType::kF32) {
      EXPECT_EQ(std::memcmp(want[o].raw_data(), got[o].raw_data(), want[o].nbytes()), 0);
      continue;
    }
    int bad = 0;
    for (int64_t i = 0; i < want[o].numel() && bad < 5; ++i) {
      const float x = want[o].data<float>()[i];
      const float y = got[o].data<float>()[i];
      if (!(std::abs(x - y) <= 1e-4f + rtol * std::abs(x))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": ref " << x << ", cpu " << y;
        ++bad;
      }
    }
  }
}

// Two buffers live at the same step never share bytes of the arena.
void expect_no_live_overlap(const cpu::Program& program) {
  const auto& buffers = program.buffers();
  const auto& offsets = program.offsets();
  for (size_t a = 0; a < buffers.size(); ++a) {
    if (buffers[a].kind != cpu::Buffer::Kind::kArena || buffers[a].bytes == 0) continue;
    EXPECT_LE(offsets[a] + buffers[a].bytes, program.arena_bytes());
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      if (buffers[b].kind != cpu::Buffer::Kind::kArena || buffers[b].bytes == 0) continue;
      const bool live_together =
          buffers[a].first <= buffers[b].last && buffers[b].first <= buffers[a].last;
      const bool disjoint = offsets[a] + buffers[a].bytes <= offsets[b] ||
                            offsets[b] + buffers[b].bytes <= offsets[a];
      if (live_together) {
        EXPECT_TRUE(disjoint) << "buffers " << a << " and " << b;
      }
    }
  }
}

Value* conv(GraphBuilder& b, Value* x, int64_t in, int64_t out, int64_t k, int64_t stride,
            uint32_t seed, int64_t group = 1) {
  ops::Conv op;
  op.group = group;
  op.strides = std::vector<int64_t>{stride, stride};
  op.pads = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  const float scale = 1.0f / std::sqrt(static_cast<float>(in / group * k * k));
  Value* w = b.constant(random_tensor(Shape{out, in / group, k, k}, seed, scale));
  Value* bias = b.constant(random_tensor(Shape{out}, seed + 1, 0.1f));
  return b.add(Op(op), {x, w, bias}, "conv" + std::to_string(seed));
}

// A small ResNet: stem conv + max pool, two residual blocks (one with a strided projection),
// global average pool, flatten, a classifier.
std::shared_ptr<Graph> tiny_resnet(int64_t batch) {
  auto graph = std::make_shared<Graph>("tiny_resnet");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{batch, 3, 32, 32}));
  Value* relu = b.add(Op(ops::Relu{}), {conv(b, x, 3, 16, 3, 1, 10)}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  Value* h = b.add(Op(pool), {relu}, "pool");
  // Block 1: identity shortcut.
  Value* a = b.add(Op(ops::Relu{}), {conv(b, h, 16, 16, 3, 1, 20)}, "b1_relu");
  Value* sum = b.add(Op(ops::Add{}), {conv(b, a, 16, 16, 3, 1, 30), h}, "b1_add");
  h = b.add(Op(ops::Relu{}), {sum}, "b1_out");
  // Block 2: strided, with a 1x1 projection shortcut.
  a = b.add(Op(ops::Relu{}), {conv(b, h, 16, 32, 3, 2, 40)}, "b2_relu");
  Value* shortcut = conv(b, h, 16, 32, 1, 2, 50);
  sum = b.add(Op(ops::Add{}), {conv(b, a, 32, 32, 3, 1, 60), shortcut}, "b2_add");
  h = b.add(Op(ops::Relu{}), {sum}, "b2_out");
  Value* gap = b.add(Op(ops::GlobalAveragePool{}), {h}, "gap");
  ops::Flatten flatten;
  flatten.axis = 1;
  Value* flat = b.add(Op(flatten), {gap}, "flatten");
  ops::Gemm gemm;
  gemm.transB = 1;
  Value* logits = b.add(Op(gemm),
                        {flat, b.constant(random_tensor(Shape{10, 32}, 70)),
                         b.constant(random_tensor(Shape{10}, 71))},
                        "fc");
  b.output(b.add(Op(ops::Softmax{}), {logits}, "probs"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

using kiln::test::ScopedEnv;

class CpuProgramLayouts : public testing::TestWithParam<const char*> {};

TEST_P(CpuProgramLayouts, ResidualNetworkMatchesRefWithFusedStepsAndFewReorders) {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", GetParam());
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 32, 32}, 1)};
  std::vector<Tensor> want = run(*compile_for(tiny_resnet(2), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(2), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr) << "a static graph runs as a planned program";
  expect_close(want, run(*exe, inputs));

  // The residual Adds and their Relus run inside the convolutions (sum + eltwise post-ops).
  // Channel-blocked, the last one also computes the GlobalAveragePool of its output (pool_after).
  const int pooled = program->count_steps("Conv+Add+Relu+GlobalAveragePool");
  EXPECT_EQ(pooled, std::string(GetParam()) == "blocked16" ? 1 : 0);
  EXPECT_EQ(program->count_steps("Conv+Add+Relu") + pooled, 2) << print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("Add"), 0);
  EXPECT_EQ(program->count_steps("Relu"), 0);
  // Blocked layouts run from the first conv's output to the pool at the end: reorders only at the
  // edges (into the network, out of the pooled features).
  EXPECT_LE(program->count_steps("Reorder"), 3);
  expect_no_live_overlap(*program);
  EXPECT_LT(program->arena_bytes(), program->unplanned_bytes()) << "dead values' space is reused";

  // The residual is dead after its Add: the convolution adds into the residual's own buffer.
  const auto& steps = program->steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i]->kind != "Conv+Add+Relu") continue;
    bool written_before = false;
    for (size_t j = 0; j < i; ++j) {
      for (int id : steps[j]->writes) written_before |= id == steps[i]->writes.front();
    }
    EXPECT_TRUE(written_before) << "step " << i << " writes a fresh buffer, not its residual's";
  }
  // Flatten runs as a view of the pooled features: no step, no copy.
  EXPECT_EQ(program->count_steps("Flatten"), 0);
  int views = 0;
  for (const cpu::Buffer& b : program->buffers()) views += b.kind == cpu::Buffer::Kind::kView;
  EXPECT_EQ(views, 1);
}

INSTANTIATE_TEST_SUITE_P(ConvLayouts, CpuProgramLayouts, testing::Values("any", "blocked16"));

TEST(CpuProgram, BatchNormConcatSiluAndClipMatchRef) {
  // DenseNet's BN-Relu-Conv and concat, EfficientNet's SiLU, MobileNetV2's Clip(0, 6) and
  // depthwise convolution, plus ops that run their ref kernels in between (Transpose, ReduceMean).
  auto make = [] {
    auto graph = std::make_shared<Graph>("mixed");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 16, 12, 12}));
    Value* c1 = conv(b, x, 16, 32, 3, 1, 5);
    Value* silu = b.add(Op(ops::Mul{}), {c1, b.add(Op(ops::Sigmoid{}), {c1}, "sig")}, "silu");
    Value* dw = conv(b, silu, 32, 32, 3, 1, 6, /*group=*/32);
    Value* relu6 =
        b.add(Op(ops::Clip{}),
              {dw, b.constant(Tensor::scalar(0.0f)), b.constant(Tensor::scalar(6.0f))}, "relu6");
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), {relu6, x}, "concat");
    Value* bn = b.add(
        Op(ops::BatchNormalization{}),
        {cat, b.constant(random_tensor(Shape{48}, 7)), b.constant(random_tensor(Shape{48}, 8)),
         b.constant(random_tensor(Shape{48}, 9)), b.constant(positive_tensor(Shape{48}, 10))},
        "bn");
    Value* relu = b.add(Op(ops::Relu{}), {bn}, "bn_relu");
    // A Pad by zeros, as exporters leave before pools: removed (algebraic_simplification).
    Value* padded =
        b.add(Op(ops::Pad{}), {relu, b.constant(Tensor::from_vector(std::vector<int64_t>(8, 0)))},
              "pad0");
    Value* y = conv(b, padded, 48, 8, 1, 1, 11);
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 3, 1};
    b.output(b.add(Op(t), {y}, "nhwc"));
    b.output(b.add(Op(ops::Sigmoid{}), {relu6}, "side"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  std::shared_ptr<Graph> ref_graph = make();
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 16, 12, 12}, 2)};
  std::vector<Tensor> want = run(*compile_for(ref_graph, "ref"), inputs);
  // In the layouts oneDNN picks (a network this small with a depthwise convolution would run
  // channel-blocked, where the Transpose is a Reorder rather than a view).
  ScopedEnv any("KILN_CPU_CONV_LAYOUT", "any");
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Conv+SiLU"), 1);
  EXPECT_EQ(program->count_steps("Conv+Clip"), 1);
  EXPECT_EQ(program->count_steps("Concat"), 1);
  EXPECT_EQ(program->count_steps("BatchNormalization+Relu"), 1);
  // The Transpose is a strided view of the Conv's output (copied by a Reorder only if that is
  // not already its row-major order).
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_LE(program->count_steps("Reorder"), 2);
  EXPECT_EQ(program->count_steps("Pad"), 0);
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, TransposeOfAChannelBlockedTensorIsOneReorder) {
  // The Conv writes nChw16c; the Transpose reads it with permuted axes into its plain output (not
  // a Reorder to plain and a second one through permuted strides).
  auto make = [] {
    auto graph = std::make_shared<Graph>("blocked_transpose");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 16, 6, 5}));
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 3, 1};
    b.output(b.add(Op(t), {conv(b, x, 16, 32, 3, 1, 40)}, "nhwc"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 16, 6, 5}, 41)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  ScopedEnv blocked("KILN_CPU_CONV_LAYOUT", "blocked16");
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Transpose"), 1);
  // Only the input's, into the Conv's layout.
  EXPECT_EQ(program->count_steps("Reorder"), 1);
  for (const auto& step : program->steps()) {
    if (step->kind == "Reorder") {
      EXPECT_EQ(step->node->kind(), OpKind::kConv);
    }
  }
}

// A DenseNet block: every layer's BatchNormalization+Relu reads the Concat of the block input
// and all earlier layers' outputs, and a transition reads the Concat of all of them. Each layer
// adds `growth` channels (a 3x3 convolution from 2 * growth); `pool`: the transition ends in a 2x2
// AveragePool (DenseNet's).
std::shared_ptr<Graph> dense_block(int64_t batch, int64_t growth = 8, bool pool = false) {
  auto graph = std::make_shared<Graph>("dense");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, 8, 10, 10}));
  const int64_t wide = 2 * growth;
  std::vector<Value*> features = {b.add(Op(ops::Relu{}), {conv(b, x, 8, wide, 3, 1, 1)}, "stem")};
  auto bn_relu = [&](Value* v, int64_t channels, uint32_t seed) {
    Value* bn = b.add(Op(ops::BatchNormalization{}),
                      {v, b.constant(random_tensor(Shape{channels}, seed)),
                       b.constant(random_tensor(Shape{channels}, seed + 1)),
                       b.constant(random_tensor(Shape{channels}, seed + 2)),
                       b.constant(positive_tensor(Shape{channels}, seed + 3))},
                      "bn" + std::to_string(seed));
    return b.add(Op(ops::Relu{}), {bn}, "bn_relu" + std::to_string(seed));
  };
  for (uint32_t layer = 0; layer < 3; ++layer) {
    const int64_t channels = wide + growth * static_cast<int64_t>(layer);
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), features, "cat" + std::to_string(layer));
    Value* h = bn_relu(cat, channels, 100 + 10 * layer);
    h = b.add(Op(ops::Relu{}), {conv(b, h, channels, wide, 1, 1, 200 + 10 * layer)}, "mid");
    features.push_back(conv(b, h, wide, growth, 3, 1, 300 + 10 * layer));
  }
  Value* all = b.add(Op(ops::Concat{.axis = 1}), features, "cat_all");
  Value* y = conv(b, bn_relu(all, wide + 3 * growth, 400), wide + 3 * growth, 4, 1, 1, 500);
  if (pool) {
    ops::AveragePool avg;
    avg.kernel_shape = std::vector<int64_t>{2, 2};
    avg.strides = std::vector<int64_t>{2, 2};
    y = b.add(Op(avg), {y}, "transition_pool");
  }
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, DenseBlockConcatsRunInsideTheirBatchNormsAndMatchRef) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 8, 10, 10}, 7)};
    std::vector<Tensor> want = run(*compile_for(dense_block(batch), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(dense_block(batch), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs));
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    // Every BatchNormalization reads its Concat's pieces where they lie: no Concat copies them.
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 4) << steps;
    EXPECT_EQ(program->count_steps("Concat"), 0) << steps;
    EXPECT_EQ(program->count_steps("BatchNormalization+Relu"), 0) << steps;
    EXPECT_EQ(program->count_steps("Relu"), 0) << steps;
    expect_no_live_overlap(*program);
  }
}

TEST(CpuProgram, WideDenseBlockRunsChannelBlockedWithConcatsReadInPlace) {
  // DenseNet-121's shape: 3x3 convolutions from 64 or more channels to 32 run as Winograd over
  // nChw16c, and every BatchNormalization reads its Concat's nChw16c pieces where they lie. The
  // transition's pool moves before its Conv (pool_before_pointwise_conv) into that pass.
  for (int64_t batch : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*dense_block(batch, 32, true));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 8, 10, 10}, 8)};
    std::vector<Tensor> want = run(*compile_for(dense_block(batch, 32, true), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(dense_block(batch, 32, true), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-3f);
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 3) << steps;
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu+AveragePool"), 1) << steps;
    EXPECT_EQ(program->count_steps("Concat"), 0) << steps;
    EXPECT_EQ(program->count_steps("AveragePool"), 0) << steps;
    // A reorder only out of the network: the 8-channel stem runs direct, not as Winograd, and
    // reads the plain input.
    EXPECT_EQ(program->count_steps("Reorder"), 1) << steps;
    for (const auto& step : program->steps()) {
      if (step->kind.rfind("Concat+BatchNormalization+Relu", 0) != 0) continue;
      const cpu::Buffer& out = program->buffers()[static_cast<size_t>(step->writes[0])];
      EXPECT_EQ(out.layout, dnnl::memory::desc(out.layout.dims(), dnnl::memory::data_type::f32,
                                               dnnl::memory::format_tag::nChw16c));
    }
    expect_no_live_overlap(*program);
  }
}

TEST(CpuProgram, ConcatOfPlainInputsRunsInsideEachBatchNormReadingIt) {
  // Plain (NCHW) pieces, two readers: one BatchNormalization with a Relu, one without.
  auto make = [] {
    auto graph = std::make_shared<Graph>("planar");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 3, 5, 4}));
    Value* z = b.input("z", TensorType(DType::kF32, Shape{2, 5, 5, 4}));
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), {x, z}, "cat");
    for (uint32_t seed : {10u, 20u}) {
      Value* bn = b.add(Op(ops::BatchNormalization{}),
                        {cat, b.constant(random_tensor(Shape{8}, seed)),
                         b.constant(random_tensor(Shape{8}, seed + 1)),
                         b.constant(random_tensor(Shape{8}, seed + 2)),
                         b.constant(positive_tensor(Shape{8}, seed + 3))},
                        "bn" + std::to_string(seed));
      b.output(seed == 10u ? b.add(Op(ops::Relu{}), {bn}, "relu") : bn);
    }
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 5, 4}, 1),
                                      random_tensor(Shape{2, 5, 5, 4}, 2)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 1);
  EXPECT_EQ(program->count_steps("Concat+BatchNormalization"), 1);
  EXPECT_EQ(program->count_steps("Concat"), 0);
}

TEST(CpuProgram, TransformerPiecesMatchRef) {
  // A BERT feed-forward and attention slice: MatMul + bias + GELU (as exporters write it),
  // LayerNorm, per-head Transpose, batched MatMul of two activations, Softmax.
  auto make = [] {
    auto graph = std::make_shared<Graph>("encoder");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 8, 16}));
    Value* h =
        b.add(Op(ops::MatMul{}), {x, b.constant(random_tensor(Shape{16, 32}, 20, 0.3f))}, "fc1");
    h = b.add(Op(ops::Add{}), {h, b.constant(random_tensor(Shape{32}, 21))}, "fc1_bias");
    Value* erf =
        b.add(Op(ops::Erf{}),
              {b.add(Op(ops::Div{}), {h, b.constant(Tensor::scalar(1.41421356f))}, "gelu_div")},
              "gelu_erf");
    Value* one_plus = b.add(Op(ops::Add{}), {erf, b.constant(Tensor::scalar(1.0f))}, "gelu_add");
    Value* gelu =
        b.add(Op(ops::Mul{}),
              {b.add(Op(ops::Mul{}), {h, one_plus}, "gelu_mul"), b.constant(Tensor::scalar(0.5f))},
              "gelu_half");
    Value* y =
        b.add(Op(ops::MatMul{}), {gelu, b.constant(random_tensor(Shape{32, 16}, 22, 0.2f))}, "fc2");
    y = b.add(Op(ops::Add{}), {y, x}, "residual");
    Value* norm = b.add(
        Op(ops::LayerNormalization{}),
        {y, b.constant(random_tensor(Shape{16}, 23)), b.constant(random_tensor(Shape{16}, 24))},
        "ln");
    ops::Reshape reshape;
    Value* heads = b.add(Op(reshape),
                         {norm, b.constant(Tensor::from_vector(std::vector<int64_t>{2, 8, 4, 4}))},
                         "split_heads");
    ops::Transpose q;
    q.perm = std::vector<int64_t>{0, 2, 1, 3};
    ops::Transpose k;
    k.perm = std::vector<int64_t>{0, 2, 3, 1};
    Value* scores = b.add(Op(ops::MatMul{}),
                          {b.add(Op(q), {heads}, "q"), b.add(Op(k), {heads}, "k")}, "scores");
    b.output(b.add(Op(ops::Softmax{}), {scores}, "attention"));
    b.output(norm);
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 25)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-3f);
  EXPECT_EQ(program->count_steps("MatMul+Add+Gelu"), 1);
  EXPECT_EQ(program->count_steps("MatMul+Add"), 1);  // fc2 with the residual as a sum post-op
  EXPECT_EQ(program->count_steps("LayerNormalization"), 1);
  // The per-head Transposes are read through strides by the scores MatMul: no copies.
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_EQ(program->count_steps("Reorder"), 0);
  EXPECT_EQ(program->count_steps("MatMul"), 1);
  EXPECT_EQ(program->count_steps("Softmax"), 1);
  EXPECT_EQ(program->count_steps("Erf"), 0);
  expect_no_live_overlap(*program);
}

// EfficientNet's MBConv block: 1x1 expansion + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation
// (global average pool, 1x1 reduce + SiLU, 1x1 expand + Sigmoid, channel-wise Mul), 1x1
// projection and the residual Add; then a MobileNetV2 block (Clip(0, 6)) on the result.
std::shared_ptr<Graph> mbconv_network(int64_t batch) {
  auto graph = std::make_shared<Graph>("mbconv");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, 16, 24, 24}));
  auto silu = [&](Value* v, const std::string& name) {
    return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v}, name + "_sigmoid")}, name);
  };
  Value* e = silu(conv(b, x, 16, 96, 1, 1, 100), "expand_silu");
  Value* d = silu(conv(b, e, 96, 96, 3, 1, 102, /*group=*/96), "dw_silu");
  Value* g = b.add(Op(ops::GlobalAveragePool{}), {d}, "se_pool");
  Value* r = silu(conv(b, g, 96, 4, 1, 1, 104), "se_reduce_silu");
  Value* s = b.add(Op(ops::Sigmoid{}), {conv(b, r, 4, 96, 1, 1, 106)}, "se_gate");
  Value* scaled = b.add(Op(ops::Mul{}), {d, s}, "se_scale");
  Value* y = b.add(Op(ops::Add{}), {conv(b, scaled, 96, 16, 1, 1, 108), x}, "residual");
  auto relu6 = [&](Value* v, const std::string& name) {
    return b.add(Op(ops::Clip{}),
                 {v, b.constant(Tensor::scalar(0.0f)), b.constant(Tensor::scalar(6.0f))}, name);
  };
  Value* m = relu6(conv(b, y, 16, 64, 1, 1, 110), "mb_expand_relu6");
  m = relu6(conv(b, m, 64, 64, 3, 2, 112, /*group=*/64), "mb_dw_relu6");
  b.output(conv(b, m, 64, 24, 1, 1, 114));
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

// A BERT attention block as torch exports it: one QKV projection, Split, per-head Reshape and
// Transposes, scaled and masked scores, Softmax, the context's Transpose back, the output
// projection with its residual, LayerNorm.
std::shared_ptr<Graph> attention_block() {
  auto graph = std::make_shared<Graph>("attention");
  GraphBuilder b(*graph);
  const int64_t batch = 2, seq = 8, hidden = 16, heads = 4, d = 4;
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, seq, hidden}));
  Value* mask = b.input("mask", TensorType(DType::kF32, Shape{batch, 1, 1, seq}));
  Value* qkv = b.add(Op(ops::MatMul{}),
                     {x, b.constant(random_tensor(Shape{hidden, 3 * hidden}, 40, 0.3f))}, "qkv");
  qkv = b.add(Op(ops::Add{}), {qkv, b.constant(random_tensor(Shape{3 * hidden}, 41, 0.1f))},
              "qkv_bias");
  ops::Split split;
  split.axis = -1;
  std::vector<Value*> parts = b.add(Op(split), {qkv}, 3, "split");
  auto heads_of = [&](Value* v, std::vector<int64_t> perm, const std::string& name) {
    Value* r =
        b.add(Op(ops::Reshape{}),
              {v, b.constant(Tensor::from_vector(std::vector<int64_t>{batch, seq, heads, d}))},
              name + "_heads");
    ops::Transpose t;
    t.perm = std::move(perm);
    return b.add(Op(t), {r}, name + "_t");
  };
  Value* q = heads_of(parts[0], {0, 2, 1, 3}, "q");
  Value* k = heads_of(parts[1], {0, 2, 3, 1}, "k");
  Value* v = heads_of(parts[2], {0, 2, 1, 3}, "v");
  Value* scores = b.add(Op(ops::MatMul{}), {q, k}, "scores");
  scores = b.add(Op(ops::Mul{}), {scores, b.constant(Tensor::scalar(0.5f))}, "scale");
  scores = b.add(Op(ops::Add{}), {scores, mask}, "masked");
  Value* probs = b.add(Op(ops::Softmax{}), {scores}, "probs");
  Value* ctx = b.add(Op(ops::MatMul{}), {probs, v}, "context");
  ops::Transpose back;
  back.perm = std::vector<int64_t>{0, 2, 1, 3};
  ctx = b.add(Op(ops::Reshape{}),
              {b.add(Op(back), {ctx}, "context_t"),
               b.constant(Tensor::from_vector(std::vector<int64_t>{batch, seq, hidden}))},
              "merge_heads");
  Value* y = b.add(Op(ops::MatMul{}),
                   {ctx, b.constant(random_tensor(Shape{hidden, hidden}, 42, 0.3f))}, "proj");
  y = b.add(Op(ops::Add{}), {y, b.constant(random_tensor(Shape{hidden}, 43, 0.1f))}, "proj_bias");
  y = b.add(Op(ops::Add{}), {x, y}, "residual");
  b.output(b.add(Op(ops::LayerNormalization{}),
                 {y, b.constant(random_tensor(Shape{hidden}, 44)),
                  b.constant(random_tensor(Shape{hidden}, 45))},
                 "norm"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, AttentionRunsWithoutCopiesAndMatchesRef) {
  Tensor mask(DType::kF32, Shape{2, 1, 1, 8});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = i % 8 >= 6 ? -1e4f : 0.0f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 46), mask};
  std::vector<Tensor> want = run(*compile_for(attention_block(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(attention_block(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-3f);
  // Split and the Transposes are strided views; the scale and the mask are post-ops of Q·Kᵀ; P·V
  // writes the context transposed; the residual Add is the projection's sum post-op.
  std::string kinds;
  for (const auto& step : program->steps()) kinds += step->kind + " ";
  EXPECT_EQ(kinds, "MatMul+Add MatMul+Mul+Add Softmax MatMul MatMul+Add+Add LayerNormalization ");
  int views = 0;
  for (const cpu::Buffer& buffer : program->buffers()) {
    views += buffer.kind == cpu::Buffer::Kind::kView && !buffer.is_plain();
  }
  EXPECT_GE(views, 6);  // q, k, v slices and their heads
  expect_no_live_overlap(*program);
}

// MatMul + bias, then GELU's tanh form as torch exports it (x^3 as Mul(x, Mul(x, x)), the 0.5
// last) or with Pow(x, 3) and the 0.5 first.
std::shared_ptr<Graph> gelu_tanh_mlp(bool torch_form) {
  auto graph = std::make_shared<Graph>("gelu_tanh");
  GraphBuilder b(*graph);
  auto scalar = [&](float v) { return b.constant(Tensor::scalar(v)); };
  Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 5, 8}));
  Value* h = b.add(Op(ops::MatMul{}), {x, b.constant(random_tensor(Shape{8, 12}, 50, 0.5f))}, "fc");
  h = b.add(Op(ops::Add{}), {h, b.constant(random_tensor(Shape{12}, 51))}, "fc_bias");
  Value* cube = torch_form ? b.add(Op(ops::Mul{}), {h, b.add(Op(ops::Mul{}), {h, h}, "sq")}, "cube")
                           : b.add(Op(ops::Pow{}), {h, scalar(3.0f)}, "cube");
  Value* inner =
      b.add(Op(ops::Add{}), {h, b.add(Op(ops::Mul{}), {scalar(0.044715f), cube}, "c3")}, "inner");
  Value* t = b.add(Op(ops::Tanh{}), {b.add(Op(ops::Mul{}), {scalar(0.7978845608f), inner}, "arg")},
                   "tanh");
  Value* one_plus = b.add(Op(ops::Add{}), {scalar(1.0f), t}, "one_plus");
  Value* y =
      torch_form
          ? b.add(Op(ops::Mul{}), {scalar(0.5f), b.add(Op(ops::Mul{}), {h, one_plus}, "m")}, "gelu")
          : b.add(Op(ops::Mul{}), {b.add(Op(ops::Mul{}), {h, scalar(0.5f)}, "half"), one_plus},
                  "gelu");
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

// Squeeze-and-excitation of 40 channels (not a multiple of 16: nChw16c pads the gate) reduced to
// 10, at batch 1: its two convolutions run as one step of kiln's in either layout.
TEST_P(CpuProgramLayouts, ExcitationOfPaddedChannelsMatchesRef) {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", GetParam());
  auto network = [] {
    auto graph = std::make_shared<Graph>("excitation");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 40, 6, 6}));
    auto silu = [&](Value* v, const std::string& name) {
      return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v}, name + "_sigmoid")}, name);
    };
    Value* d = silu(conv(b, x, 40, 40, 3, 1, 130, /*group=*/40), "dw_silu");
    Value* g = b.add(Op(ops::GlobalAveragePool{}), {d}, "se_pool");
    Value* r = silu(conv(b, g, 40, 10, 1, 1, 132), "se_reduce_silu");
    Value* gate = b.add(Op(ops::Sigmoid{}), {conv(b, r, 10, 40, 1, 1, 134)}, "se_gate");
    b.output(conv(b, b.add(Op(ops::Mul{}), {d, gate}, "se_scale"), 40, 24, 1, 1, 136));
    b.output(gate);
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 40, 6, 6}, 138)};
  std::vector<Tensor> want = run(*compile_for(network(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(network(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-4f);
  if (cpu::has_fast_silu()) {
    EXPECT_EQ(program->count_steps("Conv+SiLU+Conv+Sigmoid"), 1);
  }
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, DepthwiseSeparableNetworksRunChannelBlockedAndMatchRef) {
  for (int64_t batch : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*mbconv_network(batch));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 16, 24, 24}, 120)};
    std::vector<Tensor> want = run(*compile_for(mbconv_network(batch), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(mbconv_network(batch), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-3f);
    // The squeeze-and-excitation pool is computed in the depthwise convolution's SiLU pass; at
    // batch 1 its two convolutions (one pixel) are one step of kiln's (excitation.h).
    EXPECT_EQ(program->count_steps("Conv+SiLU+GlobalAveragePool"), 1);
    EXPECT_EQ(program->count_steps("GlobalAveragePool"), 0);
    EXPECT_EQ(program->count_steps("Conv+SiLU+Conv+Sigmoid"), batch == 1 ? 1 : 0);
    EXPECT_EQ(program->count_steps("Conv+SiLU"), batch == 1 ? 1 : 2);
    EXPECT_EQ(program->count_steps("Conv+Sigmoid"), batch == 1 ? 0 : 1);
    EXPECT_EQ(program->count_steps("Conv+Clip"), 2);
    // The squeeze-and-excitation convolutions (one pixel, a few hundred weights) run on one
    // thread; the expansion and the depthwise convolution on the whole team.
    int one_thread_silu = 0;
    for (const auto& step : program->steps()) {
      if (step->kind.find("Sigmoid") != std::string::npos) {
        EXPECT_TRUE(step->one_thread) << step->kind;
      }
      if (step->kind.rfind("Conv+SiLU", 0) == 0) one_thread_silu += step->one_thread ? 1 : 0;
    }
    EXPECT_EQ(one_thread_silu, 1);
    // At batch 1 the gate scales the projection's weights (no Mul step); at batch 2 it cannot.
    EXPECT_EQ(program->count_steps("Mul+Conv+Add"), batch == 1 ? 1 : 0);
    EXPECT_EQ(program->count_steps("Mul"), batch == 1 ? 0 : 1);
    // Only the input and the two outputs change layout.
    EXPECT_EQ(program->count_steps("Reorder"), 3);
    expect_no_live_overlap(*program);
  }
  {
    // The same in the layouts oneDNN picks (NHWC, the gate plain).
    ScopedEnv any("KILN_CPU_CONV_LAYOUT", "any");
    for (int64_t batch : {1, 2}) {
      const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 16, 24, 24}, 121)};
      std::vector<Tensor> want = run(*compile_for(mbconv_network(batch), "ref"), inputs);
      std::shared_ptr<Executable> exe = compile_for(mbconv_network(batch), "cpu");
      ASSERT_NE(exe, nullptr);
      ASSERT_NE(cpu_program(*exe), nullptr);
      expect_close(want, run(*exe, inputs), 1e-3f);
      EXPECT_EQ(cpu_program(*exe)->count_steps("Mul+Conv+Add"), batch == 1 ? 1 : 0);
    }
  }
  // A network without depthwise convolutions keeps the layouts oneDNN picks.
  auto layout = cpu::choose_conv_layout(*tiny_resnet(1));
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*layout, cpu::ConvLayout::kAny);
}

TEST(CpuProgram, GeluTanhFormsRunAsOnePostOp) {
  for (bool torch_form : {true, false}) {
    const std::vector<Tensor> inputs = {random_tensor(Shape{2, 5, 8}, 52, 2.0f)};
    std::vector<Tensor> want = run(*compile_for(gelu_tanh_mlp(torch_form), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(gelu_tanh_mlp(torch_form), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-4f);
    ASSERT_EQ(program->steps().size(), 1u) << torch_form;
    EXPECT_EQ(program->steps()[0]->kind, "MatMul+Add+GeluTanh");
  }
}

// Compiles the graph `make` builds for ref and for cpu, checks cpu's outputs on `inputs` against
// ref's (`rtol`), and returns the cpu executable (null when it did not compile).
template <typename MakeGraph>
std::shared_ptr<Executable> compile_matching_ref(const MakeGraph& make,
                                                 const std::vector<Tensor>& inputs, float rtol) {
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  if (exe != nullptr) expect_close(want, run(*exe, inputs), rtol);
  return exe;
}

// SqueezeNet's shape: a 3x3 stride-2 stem, a max pool, then fire modules (1x1 squeeze to few
// channels, 1x1 and 3x3 expands concatenated).
std::shared_ptr<Graph> fire_network(int64_t batch) {
  auto graph = std::make_shared<Graph>("fire_network");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{batch, 3, 34, 34}));
  Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 3, 64, 3, 2, 130)}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  h = b.add(Op(pool), {h}, "pool");
  int64_t channels = 64;
  uint32_t seed = 140;
  for (int64_t squeeze : {16, 32}) {
    auto relu = [&](Value* v) {
      return b.add(Op(ops::Relu{}), {v}, "relu" + std::to_string(seed));
    };
    Value* s = relu(conv(b, h, channels, squeeze, 1, 1, seed));
    Value* e1 = relu(conv(b, s, squeeze, 4 * squeeze, 1, 1, seed + 2));
    Value* e3 = relu(conv(b, s, squeeze, 4 * squeeze, 3, 1, seed + 4));
    h = b.add(Op(ops::Concat{.axis = 1}), {e1, e3}, "fire" + std::to_string(seed));
    channels = 8 * squeeze;
    seed += 10;
  }
  b.output(h);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, FireModulesRunChannelBlockedAndMatchRef) {
  // Winograd pays from 32 input channels: the network runs blocked, its 16-channel 3x3 as a
  // direct convolution; at batch 1 its stem and pool are one step of kiln's own, and the last
  // Concat (no reader to distribute it over) copies blocks.
  for (int64_t batch : {1, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*fire_network(batch));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 3, 34, 34}, 131)};
    std::shared_ptr<Executable> exe =
        compile_matching_ref([&] { return fire_network(batch); }, inputs, 1e-3f);
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    // Reorders only into the network and out of it.
    EXPECT_LE(program->count_steps("Reorder"), 2) << steps;
    if (batch == 1) {
      EXPECT_EQ(program->count_steps("Conv+Relu+MaxPool"), 1) << steps;
      EXPECT_EQ(program->count_steps("Concat"), 1) << steps;
      for (const auto& step : program->steps()) {
        if (step->kind == "Concat") {
          EXPECT_EQ(dynamic_cast<const cpu::PrimitiveStep*>(step.get()), nullptr)
              << "the blocks copied by kiln, not oneDNN's concat";
        }
      }
    }
    expect_no_live_overlap(*program);
  }
}

TEST(CpuProgram, SlicesAreViewsAMatMulReadsThroughStrides) {
  // torch's MultiheadAttention slices its packed projection: both operands here are Slices of one
  // tensor (the second transposed), read in place.
  auto make = [] {
    auto graph = std::make_shared<Graph>("slices");
    GraphBuilder b(*graph);
    auto ints = [&](std::vector<int64_t> v) { return b.constant(Tensor::from_vector(v)); };
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 4, 12}));
    Value* a = b.add(Op(ops::Slice{}), {x, ints({0}), ints({6}), ints({-1})}, "a");
    Value* c = b.add(Op(ops::Slice{}), {x, ints({6}), ints({12}), ints({2}), ints({1})}, "c");
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 1};
    b.output(b.add(Op(ops::MatMul{}), {a, b.add(Op(t), {c}, "ct")}, "y"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 12}, 63)};
  std::shared_ptr<Executable> exe = compile_matching_ref(make, inputs, 1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->steps().size(), 1u) << print_graph(exe->graph());
  EXPECT_EQ(program->steps()[0]->kind, "MatMul");
}

TEST(CpuProgram, DecomposedLayerNormRunsAsOneStep) {
  // LayerNorm as exporters before opset 17 write it: the cpu pipeline's layer_norm_fusion makes
  // it one LayerNormalization, run by oneDNN.
  auto make = [] {
    auto graph = std::make_shared<Graph>("ln");
    GraphBuilder b(*graph);
    ops::ReduceMean mean;
    mean.axes = std::vector<int64_t>{-1};
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 8, 16}));
    Value* d = b.add(Op(ops::Sub{}), {x, b.add(Op(mean), {x}, "mean")}, "d");
    Value* var = b.add(Op(mean),
                       {b.add(Op(ops::Pow{}), {d, b.constant(Tensor::scalar(2.0f))}, "sq")}, "var");
    Value* std =
        b.add(Op(ops::Sqrt{}),
              {b.add(Op(ops::Add{}), {var, b.constant(Tensor::scalar(1e-6f))}, "var_eps")}, "std");
    Value* y = b.add(Op(ops::Div{}), {d, std}, "norm");
    y = b.add(Op(ops::Mul{}), {y, b.constant(random_tensor(Shape{16}, 60))}, "scaled");
    b.output(b.add(Op(ops::Add{}), {y, b.constant(random_tensor(Shape{16}, 61))}, "shifted"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 62, 3.0f)};
  std::shared_ptr<Executable> exe = compile_matching_ref(make, inputs, 1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->steps().size(), 1u) << print_graph(exe->graph());
  EXPECT_EQ(program->steps()[0]->kind, "LayerNormalization");
}

TEST(CpuProgram, TheBundledModelMatchesRef) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  auto load = [&] {
    ImportOptions options;
    options.default_dim_value = 3;  // the batch
    auto model = import_onnx_file(path, options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    return std::shared_ptr<Graph>(std::move((*model)->graph));
  };
  std::shared_ptr<Graph> graph = load();
  std::vector<Tensor> inputs;
  uint32_t seed = 3;
  for (const Value* v : graph->inputs())
    inputs.push_back(random_tensor(v->tensor_type().shape(), seed++));
  std::vector<Tensor> want = run(*compile_for(graph, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(load(), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  expect_close(want, run(*exe, inputs));
}

TEST(CpuProgram, PackedWeightsLeaveTheGraphAndComeBackInItsArtifact) {
  // MatMul weights, a Gemm's transposed weights and its bias are held packed only; the addend of
  // a plain Add is read by its step as it is and stays.
  const Tensor w1 = random_tensor(Shape{24, 40}, 30, 0.3f);
  const Tensor w2 = random_tensor(Shape{16, 40}, 31, 0.3f);  // Gemm transB: [N, K]
  const Tensor c2 = random_tensor(Shape{16}, 32);
  const Tensor addend = random_tensor(Shape{6, 16}, 33);
  auto make = [&] {
    auto graph = std::make_shared<Graph>("packed");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{6, 24}));
    Value* h = b.add(Op(ops::MatMul{}), {x, b.constant(w1, "w1")}, "fc1");
    h = b.add(Op(ops::Relu{}), {h}, "relu");
    ops::Gemm gemm;
    gemm.transB = 1;
    h = b.add(Op(gemm), {h, b.constant(w2, "w2"), b.constant(c2, "c2")}, "fc2");
    b.output(b.add(Op(ops::Add{}), {h, b.constant(addend, "addend")}, "shift"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{6, 24}, 34)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  expect_close(want, run(*exe, inputs));
  auto constant = [](const Graph& g, const std::string& name) -> const Tensor* {
    for (const auto& node : g.nodes()) {
      if (node->kind() == OpKind::kConstant && node->output(0)->name() == name) {
        return node->output(0)->constant_value();
      }
    }
    ADD_FAILURE() << "no constant " << name;
    return nullptr;
  };
  EXPECT_EQ(constant(exe->graph(), "w1"), nullptr);
  EXPECT_EQ(constant(exe->graph(), "w2"), nullptr);
  EXPECT_EQ(constant(exe->graph(), "c2"), nullptr);
  const Tensor* kept = constant(exe->graph(), "addend");
  ASSERT_NE(kept, nullptr);
  EXPECT_TRUE(kept->equals(addend));

  // The graph an artifact stores has every value, bit for bit.
  Result<std::shared_ptr<const Graph>> full = exe->graph_with_constants();
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  for (const auto& [name, t] : {std::pair<std::string, const Tensor*>{"w1", &w1},
                                {"w2", &w2},
                                {"c2", &c2},
                                {"addend", &addend}}) {
    const Tensor* got = constant(**full, name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_TRUE(got->equals(*t)) << name;
  }
  ArtifactSource source;
  source.name = "packed.onnx";
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  Result<std::vector<uint8_t>> serialized =
      serialize_artifact(make_artifact_header(*exe, {}, source), **full);
  ASSERT_TRUE(serialized.ok()) << serialized.status().to_string();
  *bytes = std::move(serialized).value();
  Result<Artifact> artifact = parse_artifact(*bytes, bytes, "packed.kiln");
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  Result<LoadedArtifact> loaded = load_artifact(*artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_close(want, run(*loaded->executable, inputs));
}

// The constants of `graph` by their values' names.
std::map<std::string, const Tensor*> constants_of(const Graph& graph) {
  std::map<std::string, const Tensor*> out;
  for (const auto& node : graph.nodes()) {
    if (node->kind() == OpKind::kConstant)
      out[node->output(0)->name()] = node->output(0)->constant_value();
  }
  return out;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(CpuProgram, AnArtifactStoresPackedWeightsThatLoadInPlace) {
  // The weights the program holds packed go into the artifact as packed bytes, listed in its
  // "cpu.packed" section: loading uses them in place, readers of the graph get plain values back,
  // and the interpreter unpacks them.
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 3, 32, 32}, 60)};
  std::vector<Tensor> want = run(*compile_for(tiny_resnet(1), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_stored_packed_" + std::to_string(::getpid()) + ".kiln"))
                               .string();
  ArtifactSource source;
  source.name = "tiny_resnet.onnx";
  ASSERT_TRUE(save_artifact(path, *exe, {}, source).ok());
  Result<Artifact> artifact = open_artifact(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  ASSERT_NE(artifact->find_section("cpu.packed"), nullptr);

  // graph() has every value as the executable's plain graph has it, bit for bit; the stored
  // graph has some of them in packed layouts.
  Result<std::shared_ptr<const Graph>> plain = exe->graph_with_constants();
  Result<std::shared_ptr<Graph>> graph = artifact->graph();
  Result<std::shared_ptr<Graph>> stored = artifact->stored_graph();
  ASSERT_TRUE(plain.ok() && graph.ok() && stored.ok());
  const std::map<std::string, const Tensor*> want_values = constants_of(**plain);
  const std::map<std::string, const Tensor*> got_values = constants_of(**graph);
  const std::map<std::string, const Tensor*> stored_values = constants_of(**stored);
  ASSERT_EQ(got_values.size(), want_values.size());
  int packed = 0;
  for (const auto& [name, t] : want_values) {
    ASSERT_NE(t, nullptr) << name;
    ASSERT_NE(got_values.at(name), nullptr) << name;
    EXPECT_TRUE(got_values.at(name)->equals(*t)) << name;
    if (!stored_values.at(name)->equals(*t)) ++packed;
  }
  EXPECT_GE(packed, 3);  // the 3x3 and 1x1 convolutions' weights at least

  Result<LoadedArtifact> loaded = load_artifact(*artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_close(want, run(*loaded->executable, inputs));
  {
    const ScopedEnv interpret("KILN_CPU_INTERPRET", "1");
    Result<LoadedArtifact> interpreted = load_artifact(*artifact);
    ASSERT_TRUE(interpreted.ok()) << interpreted.status().to_string();
    EXPECT_EQ(cpu_program(*interpreted->executable), nullptr);
    expect_close(want, run(*interpreted->executable, inputs));
  }
  // Saved again from the loaded executable, whose weights are the file's bytes: the same file.
  const std::string again = path + ".again";
  ASSERT_TRUE(save_artifact(again, *loaded->executable, {}, source).ok());
  EXPECT_TRUE(file_bytes(again) == file_bytes(path));
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(CpuProgram, AMalformedPackedSectionIsADataLossError) {
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  Result<Executable::ArtifactContents> contents = exe->artifact_contents();
  ASSERT_TRUE(contents.ok()) << contents.status().to_string();
  ASSERT_EQ(contents->sections.size(), 1u);
  ASSERT_EQ(contents->sections[0].name, "cpu.packed");
  const std::span<const uint8_t> good = contents->sections[0].pieces.at(0);
  const Graph& graph = *contents->graph;
  ASSERT_TRUE(cpu::StoredPackings::read(good, graph, "t.kiln", "recompile", nullptr).ok());

  auto error_of = [&](std::vector<uint8_t> bytes) {
    Result<cpu::StoredPackings> r =
        cpu::StoredPackings::read(bytes, graph, "t.kiln", "recompile", nullptr);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Status() : r.status();
  };
  const std::vector<uint8_t> all(good.begin(), good.end());
  Status truncated = error_of(std::vector<uint8_t>(all.begin(), all.end() - 5));
  EXPECT_EQ(truncated.code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.message().find("t.kiln"), std::string::npos) << truncated.message();
  std::vector<uint8_t> wrong_node = all;
  wrong_node[8] ^= 0x7f;  // the first entry's node index
  Status node = error_of(wrong_node);
  EXPECT_EQ(node.code(), StatusCode::kDataLoss);
  EXPECT_NE(node.message().find("no constant of the graph"), std::string::npos) << node.message();
  std::vector<uint8_t> version = all;
  version[0] = 9;
  EXPECT_EQ(error_of(version).code(), StatusCode::kFailedPrecondition);
  // Every shorter prefix fails cleanly.
  for (size_t n = 0; n < all.size(); n += 7) {
    EXPECT_FALSE(cpu::StoredPackings::read(std::span<const uint8_t>(all.data(), n), graph, "t.kiln",
                                           "recompile", nullptr)
                     .ok());
  }
  // Any byte changed is an error or a section that still unpacks without reading past its
  // constants (the sanitizers' builds check the reads).
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  int accepted = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> bytes = all;
      bytes[i] ^= flip;
      std::shared_ptr<Graph> copy = clone_graph(graph);
      Result<cpu::StoredPackings> r =
          cpu::StoredPackings::read(bytes, *copy, "t.kiln", "recompile", nullptr);
      if (!r.ok()) continue;
      ++accepted;
      EXPECT_TRUE(r->unpack(engine).ok()) << "byte " << i;
    }
  }
  EXPECT_LT(accepted, static_cast<int>(all.size()));
}

TEST(CpuProgram, StoredPackedWeightsThatAStepReadsAreUnpackedOrRefused) {
  // A program lowered otherwise than the compiling one may leave a weight stored packed in the
  // graph: settle() gives it its plain values where no step reads it, and says so where one does.
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  Result<Executable::ArtifactContents> contents = exe->artifact_contents();
  Result<std::shared_ptr<const Graph>> plain = exe->graph_with_constants();
  ASSERT_TRUE(contents.ok() && plain.ok());
  const std::span<const uint8_t> section = contents->sections.at(0).pieces.at(0);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  for (bool unread : {false, true}) {
    SCOPED_TRACE(unread ? "no step reads them" : "a step reads them");
    std::shared_ptr<Graph> graph = clone_graph(*contents->graph);
    Result<cpu::StoredPackings> stored =
        cpu::StoredPackings::read(section, *graph, "t.kiln", "recompile", nullptr);
    ASSERT_TRUE(stored.ok()) << stored.status().to_string();
    ASSERT_GT(stored->count(), 0);
    Result<bool> settled = stored->settle(engine, [unread](const Value*) { return unread; });
    ASSERT_TRUE(settled.ok()) << settled.status().to_string();
    EXPECT_EQ(*settled, unread);
    if (!unread) {
      ASSERT_TRUE(stored->unpack(engine).ok());
    }
    // Either way the graph ends with every value plain, bit for bit.
    const std::map<std::string, const Tensor*> want = constants_of(**plain);
    for (const auto& [name, t] : constants_of(*graph)) {
      ASSERT_NE(t, nullptr) << name;
      EXPECT_TRUE(t->equals(*want.at(name))) << name;
    }
  }
}

TEST(CpuProgram, DroppedConstantsComeBackInPlaceWhenABuildIsUndone) {
  // Only exact packings are dropped: a blocked copy of the same type, not a conversion to bf16.
  auto graph = std::make_shared<Graph>("undo");
  GraphBuilder b(*graph);
  const Tensor w = random_tensor(Shape{64, 48}, 50);
  const Tensor converted = random_tensor(Shape{32, 16}, 51);
  Value* packed_value = b.constant(w, "w");
  Value* converted_value = b.constant(converted, "converted");
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  cpu::ReleaseAfterPacking packings({});
  const dnnl::memory::desc blocked({64, 48}, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::BA16a64b);
  cpu::pack(engine, cpu::plain_desc(w.shape()), w.raw_data(), blocked);
  cpu::pack(
      engine, cpu::plain_desc(converted.shape()), converted.raw_data(),
      dnnl::memory::desc({32, 16}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab));
  cpu::DroppedConstants dropped;
  EXPECT_TRUE(dropped.drop(packed_value, packings));
  EXPECT_FALSE(dropped.drop(converted_value, packings));
  EXPECT_EQ(packed_value->constant_value(), nullptr);
  ASSERT_NE(converted_value->constant_value(), nullptr);
  EXPECT_EQ(dropped.bytes(), w.nbytes());
  ASSERT_TRUE(dropped.undo(engine).ok());
  EXPECT_TRUE(dropped.empty());
  ASSERT_NE(packed_value->constant_value(), nullptr);
  EXPECT_TRUE(packed_value->constant_value()->equals(w));
}

TEST(CpuProgram, ConcurrentRunsOfOneExecutableGiveEachCallerItsOwnResult) {
  std::shared_ptr<Executable> ref = compile_for(tiny_resnet(1), "ref");
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  constexpr int kThreads = 4;
  constexpr int kRuns = 8;
  std::vector<std::vector<Tensor>> inputs(kThreads);
  std::vector<std::vector<Tensor>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    inputs[t] = {random_tensor(Shape{1, 3, 32, 32}, 100 + static_cast<uint32_t>(t))};
    want[t] = run(*ref, inputs[t]);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        std::vector<Argument> args(inputs[t].begin(), inputs[t].end());
        auto out = exe->run(std::move(args));
        if (!out.ok() || out->size() != 1) {
          ++mismatches[t];
          continue;
        }
        const Tensor& got = (*out)[0].tensor();
        for (int64_t i = 0; i < got.numel(); ++i) {
          if (std::abs(got.data<float>()[i] - want[t][0].data<float>()[i]) > 1e-4f) {
            ++mismatches[t];
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(CpuProgram, ProfiledRunsTimeEveryStep) {
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  RunProfile profile;
  std::vector<Argument> args = {Argument(random_tensor(Shape{1, 3, 32, 32}, 4))};
  auto out = exe->run_profiled(std::move(args), profile);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(profile.steps.size(), cpu_program(*exe)->steps().size());
  double total = 0;
  for (const StepTime& s : profile.steps) {
    EXPECT_GE(s.ms, 0.0);
    EXPECT_FALSE(s.node.empty());
    total += s.ms;
  }
  EXPECT_GT(total, 0.0);
  EXPECT_EQ(profile.steps.back().kind, "Softmax");
}

TEST(CpuProgram, DynamicBatchCompilesOnePlannedProgramPerShape) {
  // A conv net with a symbolic batch: each batch size seen is compiled to its own program.
  auto graph = std::make_shared<Graph>("dynamic");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("n"), Dim(3), Dim(8), Dim(8)}));
  Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 3, 16, 3, 1, 80)}, "relu");
  ops::Flatten flatten;
  b.output(b.add(Op(flatten), {b.add(Op(ops::GlobalAveragePool{}), {h}, "gap")}, "flat"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  std::shared_ptr<Executable> ref = compile_for(graph, "ref");
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(cpu_program(*exe), nullptr) << "the dynamic graph itself has no single program";
  const ShapeProfiles* profiles = cpu_shape_profiles(*exe);
  ASSERT_NE(profiles, nullptr);

  for (int64_t batch : {2, 5, 2}) {
    const std::vector<Tensor> in = {random_tensor(Shape{batch, 3, 8, 8}, 90 + batch)};
    std::vector<Tensor> got = run(*exe, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (Shape{batch, 16}));
    expect_close(run(*ref, in), got);
  }
  EXPECT_EQ(profiles->size(), 2u);
  EXPECT_EQ(profiles->compilations(), 2u) << "a shape seen before is not compiled again";

  // New and known shapes from several threads at once: each caller gets its own correct result.
  std::vector<std::thread> threads;
  std::vector<std::vector<Tensor>> inputs(6);
  std::vector<std::vector<Tensor>> outputs(6);
  for (size_t t = 0; t < inputs.size(); ++t) {
    inputs[t] = {random_tensor(Shape{static_cast<int64_t>(1 + t % 3), 3, 8, 8}, 100 + t)};
    threads.emplace_back([&, t] { outputs[t] = run(*exe, inputs[t]); });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < inputs.size(); ++t) expect_close(run(*ref, inputs[t]), outputs[t]);
  EXPECT_EQ(profiles->size(), 4u);  // batches 1, 2, 3, 5
}

TEST(CpuProgram, Bf16RegionsRunOnOneDnnBetweenTwoCasts) {
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 32, 32}, 1)};
  std::vector<Tensor> fp32 = run(*compile_for(tiny_resnet(2), "cpu"), inputs);
  std::shared_ptr<Graph> graph = tiny_resnet(2);
  ASSERT_TRUE(quantize_bf16(*graph).ok());
  std::shared_ptr<Graph> for_ref = tiny_resnet(2);
  ASSERT_TRUE(quantize_bf16(*for_ref).ok());
  std::vector<Tensor> ref = run(*compile_for(for_ref, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  std::vector<Tensor> got = run(*exe, inputs);
  // ref rounds each op's exact result to bf16 once; oneDNN accumulates in f32: both are within
  // bf16 rounding of each other and of fp32 (probabilities, so absolute).
  for (const std::vector<Tensor>* want : {&ref, &fp32}) {
    ASSERT_EQ(got.size(), want->size());
    for (int64_t i = 0; i < got[0].numel(); ++i) {
      EXPECT_NEAR(got[0].data<float>()[i], (*want)[0].data<float>()[i], 0.02) << i;
    }
  }
  // Every conv and the classifier run as oneDNN primitives, residual Adds fused; the activations
  // stay bf16 (blocked) from the first Cast to the last.
  for (const auto& step : program->steps()) {
    if (step->node->kind() == OpKind::kConv || step->node->kind() == OpKind::kGemm) {
      EXPECT_NE(dynamic_cast<const cpu::PrimitiveStep*>(step.get()), nullptr) << step->kind;
    }
  }
  EXPECT_EQ(program->count_steps("Conv+Add+Relu"), 2) << print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("Cast"), 2);
  std::string steps;
  for (const auto& step : program->steps())
    steps += step->kind + " " + step->node->describe() + "\n";
  // Reorders at the edges, and around the max pool (whose bf16 kernel reads another blocking
  // than the AMX convolutions write).
  EXPECT_LE(program->count_steps("Reorder"), 4) << steps;
  int blocked_bf16 = 0;
  for (const cpu::Buffer& b : program->buffers()) {
    blocked_bf16 += b.dtype == DType::kBF16 && !b.is_plain() ? 1 : 0;
  }
  EXPECT_GE(blocked_bf16, 5);
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, Bf16ActivationProductsRunOnOneDnn) {
  // Attention's shape: scores = q x k^T of two activations, then Softmax (kept in fp32).
  auto build = [] {
    auto graph = std::make_shared<Graph>("attention");
    GraphBuilder b(*graph);
    Value* q = b.input("q", TensorType(DType::kF32, Shape{2, 6, 8}));
    Value* k = b.input("k", TensorType(DType::kF32, Shape{2, 8, 6}));
    Value* scores = b.add(Op(ops::MatMul{}), {q, k}, "scores");
    b.output(b.add(Op(ops::Softmax{}), {scores}, "probs"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 8}, 3),
                                      random_tensor(Shape{2, 8, 6}, 4)};
  std::shared_ptr<Graph> for_ref = build();
  ASSERT_TRUE(quantize_bf16(*for_ref).ok());
  std::shared_ptr<Graph> graph = build();
  ASSERT_TRUE(quantize_bf16(*graph).ok());
  EXPECT_NE(print_graph(*graph).find("%scores: bf16[2,6,6] = MatMul"), std::string::npos)
      << print_graph(*graph);
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  // Every node — the Casts, the bf16 MatMul, the Softmax — runs on oneDNN, none on ref.
  EXPECT_EQ(cpu_dnnl_node_count(*exe), exe->graph().num_nodes()) << print_graph(exe->graph());
  std::vector<Tensor> want = run(*compile_for(for_ref, "ref"), inputs);
  std::vector<Tensor> got = run(*exe, inputs);
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    EXPECT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 0.01) << i;
  }
}

}  // namespace
}  // namespace kiln::compiler
