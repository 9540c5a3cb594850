// SPDX-License-Identifier: Apache-2.0
// float64 conversion: f32, f16 and bf16 graphs computed in f64 on ref, with their own inputs and
// f64 outputs.
#include <cmath>
#include <random>
#include <vector>

#include "compiler/passes/pass_test_util.h"
#include "compiler/quantize/quantize.h"

namespace kiln::compiler {
namespace {

using testing::f32;

Result<std::vector<Argument>> run_on_ref(std::shared_ptr<Graph> g, std::vector<Argument> inputs) {
  KILN_ASSIGN_OR_RETURN(auto target, make_target("ref"));
  KILN_ASSIGN_OR_RETURN(auto exe, compile(std::move(g), *target));
  return exe->run(std::move(inputs));
}

// x: f32[3] -> (x + 1e-9) - x -> y; also a Cast to f32 and a default ConstantOfShape (f32 zeros)
// added to it -> z.
std::shared_ptr<Graph> tiny_difference() {
  auto g = std::make_shared<Graph>("tiny");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({3}));
  ops::Constant eps;
  eps.value_float = 1e-9f;
  Value* e = b.add(Op(eps), {}, "eps");
  Value* y = b.add(Op(ops::Sub{}), {b.add(Op(ops::Add{}), {x, e}, "sum"), x}, "y");
  ops::Cast to_f32;
  to_f32.to = DType::kF32;
  Value* cast = b.add(Op(to_f32), {y}, "cast");
  Value* zeros =
      b.add(Op(ops::ConstantOfShape{}),
            {b.constant(Tensor::from_vector(std::vector<int64_t>{3}), "shape")}, "zeros");
  b.output(y);
  b.output(b.add(Op(ops::Add{}), {cast, zeros}, "z"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

Tensor ones() {
  return Tensor::from_vector(std::vector<float>{1.0f, 1000.0f, -1.0f});
}

TEST(Float64Conversion, ComputesInDoubleWithTheSameInputs) {
  auto as_f32 = run_on_ref(tiny_difference(), {Argument(ones())});
  ASSERT_TRUE(as_f32.ok()) << as_f32.status().to_string();
  EXPECT_EQ((*as_f32)[0].tensor().data<float>()[1], 0.0f) << "f32 loses 1e-9 next to 1000";

  std::shared_ptr<Graph> g = tiny_difference();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  EXPECT_EQ(g->inputs()[0]->type().to_string(), "f32[3]");
  EXPECT_EQ(g->outputs()[0]->type().to_string(), "f64[3]");
  EXPECT_EQ(g->outputs()[1]->type().to_string(), "f64[3]");
  auto out = run_on_ref(g, {Argument(ones())});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int k : {0, 1}) {
    const Tensor& t = (*out)[static_cast<size_t>(k)].tensor();
    ASSERT_EQ(t.dtype(), DType::kF64);
    // 1e-9 as an f32 constant, widened exactly; what is left of it next to 1000 in doubles.
    EXPECT_NEAR(t.data<double>()[0], static_cast<double>(1e-9f), 1e-15);
    EXPECT_NEAR(t.data<double>()[1], static_cast<double>(1e-9f), 1e-12);
  }
}

TEST(Float64Conversion, ResizeScalesStayF32) {
  auto g = std::make_shared<Graph>("resize");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({1, 1, 2, 2}));
  Value* roi = b.constant(Tensor::from_vector(std::vector<float>{}), "roi");
  Value* scales = b.constant(Tensor::from_vector(std::vector<float>{1, 1, 2, 2}), "scales");
  b.output(b.add(Op(ops::Resize{}), {x, roi, scales}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  const std::vector<float> values = {1, 2, 3, 4};
  auto out = run_on_ref(
      g, {Argument(Tensor::from_vector(std::span<const float>(values), Shape({1, 1, 2, 2})))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.dtype(), DType::kF64);
  ASSERT_EQ(y.shape(), Shape({1, 1, 4, 4}));
  EXPECT_EQ(y.data<double>()[0], 1.0);
  EXPECT_EQ(y.data<double>()[15], 4.0);
}

// A tensor of `dtype` (f16 or bf16) and `shape` holding `values` rounded to it.
Tensor half_tensor(DType dtype, const std::vector<float>& values, Shape shape) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF16) {
      t.data<Half>()[i] = Half(values[i]);
    } else {
      t.data<BFloat16>()[i] = BFloat16(values[i]);
    }
  }
  return t;
}

// Element i of an f16 or bf16 tensor, widened exactly.
double half_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF16 ? static_cast<float>(t.data<Half>()[i])
                                  : static_cast<float>(t.data<BFloat16>()[i]);
}

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

// x: f16[2,3] -> MatMul(x, w: f16[3,4] constant) -> Softmax(axis -1) -> y: f16[2,4].
std::shared_ptr<Graph> f16_matmul_softmax(const Tensor& w) {
  auto g = std::make_shared<Graph>("f16_matmul_softmax");
  GraphBuilder b(*g);
  Value* x = b.input("x", TensorType(DType::kF16, Shape({2, 3})));
  Value* scores = b.add(Op(ops::MatMul{}), {x, b.constant(w, "w")}, "scores");
  b.output(b.add(Op(ops::Softmax{}), {scores}, "y"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

TEST(Float64Conversion, WidensAnF16MatMulSoftmaxToADoubleReference) {
  const Tensor w = half_tensor(DType::kF16, uniform(12, 7), Shape({3, 4}));
  const Tensor x = half_tensor(DType::kF16, uniform(6, 8), Shape({2, 3}));
  // By hand, in double, from the f16 values widened exactly.
  std::vector<double> want(8);
  for (int r = 0; r < 2; ++r) {
    double row[4], max = -INFINITY, sum = 0;
    for (int c = 0; c < 4; ++c) {
      row[c] = 0;
      for (int k = 0; k < 3; ++k) row[c] += half_at(x, r * 3 + k) * half_at(w, k * 4 + c);
      max = std::max(max, row[c]);
    }
    for (double& v : row) sum += (v = std::exp(v - max));
    for (int c = 0; c < 4; ++c) want[static_cast<size_t>(r * 4 + c)] = row[c] / sum;
  }

  auto in_f16 = run_on_ref(f16_matmul_softmax(w), {Argument(x)});
  ASSERT_TRUE(in_f16.ok()) << in_f16.status().to_string();
  const Tensor& y16 = (*in_f16)[0].tensor();
  ASSERT_EQ(y16.dtype(), DType::kF16);
  double worst16 = 0;
  for (int64_t i = 0; i < 8; ++i) worst16 = std::max(worst16, std::abs(half_at(y16, i) - want[i]));
  EXPECT_GT(worst16, 1e-6) << "the f16 model rounds in f16";

  std::shared_ptr<Graph> g = f16_matmul_softmax(w);
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  EXPECT_EQ(g->inputs()[0]->type().to_string(), "f16[2,3]") << "callers feed the same input";
  EXPECT_EQ(g->outputs()[0]->type().to_string(), "f64[2,4]");
  for (const auto& node : g->nodes()) {
    if (node->kind() == OpKind::kCast) continue;
    for (const Value* out : node->outputs()) {
      EXPECT_EQ(out->tensor_type().dtype, DType::kF64) << node->name();
    }
  }
  auto out = run_on_ref(g, {Argument(x)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.dtype(), DType::kF64);
  for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR(y.data<double>()[i], want[i], 1e-15) << i;
}

// x: bf16[3] -> (x + k: bf16 constant) / ConstantOfShape(bf16 3) -> Cast(to bf16) -> y.
std::shared_ptr<Graph> bf16_chain() {
  auto g = std::make_shared<Graph>("bf16_chain");
  GraphBuilder b(*g);
  Value* x = b.input("x", TensorType(DType::kBF16, Shape({3})));
  ops::Constant k;
  k.value = half_tensor(DType::kBF16, {1.0078125f, 3.0f, 0.33398438f}, Shape({3}));
  Value* sum = b.add(Op(ops::Add{}), {x, b.add(Op(k), {}, "k")}, "sum");
  ops::ConstantOfShape three;
  three.value = half_tensor(DType::kBF16, {3.0f}, Shape({1}));
  Value* threes = b.add(
      Op(three), {b.constant(Tensor::from_vector(std::vector<int64_t>{3}), "shape")}, "threes");
  ops::Cast to_bf16;
  to_bf16.to = DType::kBF16;
  b.output(b.add(Op(to_bf16), {b.add(Op(ops::Div{}), {sum, threes}, "third")}, "y"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

TEST(Float64Conversion, WidensBf16ConstantsFillsAndCasts) {
  // 256 + 1.0078125 and 1 + 1/3 are not bf16 values: the bf16 graph rounds them, f64 does not.
  const Tensor x = half_tensor(DType::kBF16, {256.0f, -2.0f, 1.0f}, Shape({3}));
  const double k[3] = {1.0078125, 3.0, 0.333984375};
  auto in_bf16 = run_on_ref(bf16_chain(), {Argument(x)});
  ASSERT_TRUE(in_bf16.ok()) << in_bf16.status().to_string();
  EXPECT_EQ(half_at((*in_bf16)[0].tensor(), 0), 86.0) << "bf16: 256 + 1.0078 -> 258, / 3 -> 86";

  std::shared_ptr<Graph> g = bf16_chain();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  EXPECT_EQ(g->inputs()[0]->type().to_string(), "bf16[3]");
  EXPECT_EQ(g->outputs()[0]->type().to_string(), "f64[3]");
  int casts_to_f64 = 0;
  for (const auto& node : g->nodes()) {
    if (const auto* c = node->op().get_if<ops::Cast>()) {
      EXPECT_EQ(c->to, DType::kF64) << node->name();
      ++casts_to_f64;
    }
    if (const auto* c = node->op().get_if<ops::Constant>(); c && c->value.dtype() != DType::kI64) {
      EXPECT_EQ(c->value.dtype(), DType::kF64) << node->name();
    }
    if (const auto* fill = node->op().get_if<ops::ConstantOfShape>()) {
      EXPECT_EQ(fill->value.dtype(), DType::kF64);
    }
  }
  EXPECT_EQ(casts_to_f64, 2) << "the input's Cast and the model's Cast(to bf16), widened";
  auto out = run_on_ref(g, {Argument(x)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.dtype(), DType::kF64);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_DOUBLE_EQ(y.data<double>()[i], (half_at(x, i) + k[i]) / 3) << i;
}

// x: f16[4] -> QuantizeLinear(scale f16 0.25, zero point u8 10) -> DequantizeLinear -> y: f16[4].
std::shared_ptr<Graph> f16_qdq() {
  auto g = std::make_shared<Graph>("f16_qdq");
  GraphBuilder b(*g);
  Value* x = b.input("x", TensorType(DType::kF16, Shape({4})));
  Value* scale = b.constant(half_tensor(DType::kF16, {0.25f}, Shape({})), "scale");
  Value* zero = b.constant(Tensor::scalar<uint8_t>(10), "zero");
  Value* q = b.add(Op(ops::QuantizeLinear{}), {x, scale, zero}, "q");
  b.output(b.add(Op(ops::DequantizeLinear{}), {q, scale, zero}, "y"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

TEST(Float64Conversion, QuantizationOpsStayInF32BetweenWidenedValues) {
  std::shared_ptr<Graph> g = f16_qdq();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  for (const auto& node : g->nodes()) {
    if (node->kind() != OpKind::kQuantizeLinear && node->kind() != OpKind::kDequantizeLinear) {
      continue;
    }
    EXPECT_EQ(node->input(0)->tensor_type().dtype,
              node->kind() == OpKind::kQuantizeLinear ? DType::kF32 : DType::kU8);
    EXPECT_EQ(node->input(1)->tensor_type().dtype, DType::kF32) << "ONNX has no f64 scales";
  }
  ASSERT_EQ(g->outputs()[0]->type().to_string(), "f64[4]");
  EXPECT_EQ(g->outputs()[0]->name(), "y") << "outputs keep their names";
  const Tensor x = half_tensor(DType::kF16, {1.0f, -0.3f, 70.0f, 0.125f}, Shape({4}));
  auto out = run_on_ref(g, {Argument(x)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.dtype(), DType::kF64);
  // Quantized to round(x / 0.25) + 10 (ties to even) saturated to [0, 255], back as (q - 10) *
  // 0.25.
  const std::vector<double> want = {1.0, -0.25, 61.25, 0.0};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(y.data<double>()[i], want[i]) << i;
}

}  // namespace
}  // namespace kiln::compiler
