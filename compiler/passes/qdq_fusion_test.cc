// SPDX-License-Identifier: Apache-2.0
// QDQ fusion on the pattern PyTorch FX quantization exports (Q -> DQ -> Conv(DQ(int8 weights,
// axis 0), DQ(int32 bias)) -> Relu -> Q), on QDQ MatMul, and on Q/DQ pairs; the rewritten graph
// computes the same values on ref within one quantization step.
#include <map>
#include <tuple>

#include "compiler/passes/pass_test_util.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

using testing::op_counts;

Tensor filled_i8(Shape shape, int seed) {
  Tensor t(DType::kI8, std::move(shape));
  int8_t* p = t.data<int8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<int8_t>((i * 37 + seed) % 255 - 127);
  return t;
}

// The FX export of a quantized ConvReLU2d followed by a quantized Flatten.
void build_fx_conv(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", testing::f32({1, 4, 6, 6}));
  Value* xs = b.constant(Tensor::scalar(0.03f), "xs");
  Value* xz = b.constant(Tensor::scalar<uint8_t>(100), "xz");
  Value* xq = b.add(Op(ops::QuantizeLinear{}), {x, xs, xz}, "xq");
  Value* xd = b.add(Op(ops::DequantizeLinear{}), {xq, xs, xz}, "xd");
  ops::DequantizeLinear axis0;
  axis0.axis = 0;
  Value* ws = b.constant(Tensor::from_vector<float>({0.01f, 0.02f, 0.015f}), "ws");
  Value* wd = b.add(Op(axis0),
                    {b.constant(filled_i8(Shape{3, 4, 3, 3}, 5), "w"), ws,
                     b.constant(Tensor(DType::kI8, Shape{3}), "wz")},
                    "wd");
  Value* bs =
      b.constant(Tensor::from_vector<float>({0.03f * 0.01f, 0.03f * 0.02f, 0.03f * 0.015f}));
  Value* bd = b.add(Op(axis0),
                    {b.constant(Tensor::from_vector<int32_t>({50, -20, 7}), "b"), bs,
                     b.constant(Tensor(DType::kI32, Shape{3}))},
                    "bd");
  Value* conv = b.add(Op(ops::Conv{}), {xd, wd, bd}, "conv");
  Value* relu = b.add(Op(ops::Relu{}), {conv}, "relu");
  Value* ys = b.constant(Tensor::scalar(0.05f), "ys");
  Value* yz = b.constant(Tensor::scalar<uint8_t>(0), "yz");
  Value* yq = b.add(Op(ops::QuantizeLinear{}), {relu, ys, yz}, "yq");
  Value* yd = b.add(Op(ops::DequantizeLinear{}), {yq, ys, yz}, "yd");
  Value* flat = b.add(Op(ops::Flatten{}), {yd}, "flat");
  Value* fq = b.add(Op(ops::QuantizeLinear{}), {flat, ys, yz}, "fq");
  b.output(b.add(Op(ops::DequantizeLinear{}), {fq, ys, yz}, "out"));
}

Tensor run_ref(std::shared_ptr<Graph> g, const Tensor& x) {
  auto target = make_target("ref");
  auto exe = compile(std::move(g), **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = (*exe)->run({Argument(x)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return (*out)[0].tensor();
}

TEST(QdqFusion, RewritesTheFxConvReluPatternToQLinearConv) {
  auto g = std::make_shared<Graph>("fx");
  build_fx_conv(*g);
  auto original = std::make_shared<Graph>("fx");
  build_fx_conv(*original);
  Result<bool> changed = make_qdq_fusion()->run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
  // The conv, its Relu and the Flatten run on the u8 tensors; one Q at the input and one DQ at
  // the output remain.
  EXPECT_EQ(
      op_counts(*g),
      (std::map<std::string, int>{
          {"DequantizeLinear", 1}, {"Flatten", 1}, {"QLinearConv", 1}, {"QuantizeLinear", 1}}))
      << print_graph(*g);
  EXPECT_NE(print_graph(*g).find("%flat_q: u8[1,48] = Flatten[axis=1](%conv_q)"), std::string::npos)
      << print_graph(*g);

  Tensor x(DType::kF32, Shape{1, 4, 6, 6});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = static_cast<float>(i % 13) * 0.2f - 1;
  const Tensor want = run_ref(original, x);
  const Tensor got = run_ref(g, x);
  ASSERT_EQ(want.shape(), got.shape());
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_NEAR(want.data<float>()[i], got.data<float>()[i], 0.05f + 1e-6f) << i;
  }
}

// Q(MaxPool(DQ(x))) with the same parameters on both sides is MaxPool over the 8-bit data, exactly
// (Q is monotonic); with other parameters, or where the indices are read, it stays in f32.
void build_qdq_pool(Graph& g, float out_scale, bool indices) {
  GraphBuilder b(g);
  Value* x = b.input("x", testing::f32({1, 2, 6, 6}));
  Value* s = b.constant(Tensor::scalar(0.04f), "s");
  Value* z = b.constant(Tensor::scalar<uint8_t>(3), "z");
  Value* xd = b.add(Op(ops::DequantizeLinear{}),
                    {b.add(Op(ops::QuantizeLinear{}), {x, s, z}, "xq"), s, z}, "xd");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{3, 3};
  pool.strides = std::vector<int64_t>{2, 2};
  pool.pads = std::vector<int64_t>{1, 1, 1, 1};
  std::vector<Value*> pooled = b.add(Op(pool), {xd}, indices ? 2 : 1, "pool");
  Value* ys = b.constant(Tensor::scalar(out_scale), "ys");
  Value* yq = b.add(Op(ops::QuantizeLinear{}), {pooled[0], ys, z}, "yq");
  b.output(b.add(Op(ops::DequantizeLinear{}), {yq, ys, z}, "out"));
  if (indices) b.output(pooled[1]);
}

TEST(QdqFusion, RunsAMaxPoolBetweenEqualParametersOnTheEightBitData) {
  for (const auto& [scale, indices, fused] :
       {std::tuple{0.04f, false, true}, {0.05f, false, false}, {0.04f, true, false}}) {
    SCOPED_TRACE(::testing::Message() << scale << " " << indices);
    auto g = std::make_shared<Graph>("pool");
    build_qdq_pool(*g, scale, indices);
    auto original = std::make_shared<Graph>("pool");
    build_qdq_pool(*original, scale, indices);
    ASSERT_TRUE(make_qdq_fusion(/*max_pools=*/true)->run(*g).ok());
    ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
    const std::string printed = print_graph(*g);
    EXPECT_EQ(printed.find("MaxPool") != std::string::npos &&
                  printed.find("u8[1,2,3,3] = MaxPool") != std::string::npos,
              fused)
        << printed;
    Tensor x(DType::kF32, Shape{1, 2, 6, 6});
    for (int64_t i = 0; i < x.numel(); ++i) {
      x.data<float>()[i] = static_cast<float>((i * 29) % 71) * 0.13f - 4;
    }
    const Tensor want = run_ref(original, x);
    const Tensor got = run_ref(g, x);
    ASSERT_EQ(want.shape(), got.shape());
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(want.data<float>()[i], got.data<float>()[i]) << i;
    }
  }
}

TEST(QdqFusion, LeavesMaxPoolsToTargetsThatDoNotAskForThem) {
  auto g = std::make_shared<Graph>("pool");
  build_qdq_pool(*g, 0.04f, false);
  ASSERT_TRUE(make_qdq_fusion()->run(*g).ok());
  const std::string printed = print_graph(*g);
  EXPECT_NE(printed.find("f32[1,2,3,3] = MaxPool"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("u8[1,2,3,3] = MaxPool"), std::string::npos) << printed;
}

TEST(QdqFusion, RewritesQdqMatMulAndLeavesARelu) {
  Graph g("mm");
  GraphBuilder b(g);
  Value* a = b.input("a", TensorType(DType::kU8, Shape{2, 8}));
  Value* s = b.constant(Tensor::scalar(0.1f), "s");
  Value* z = b.constant(Tensor::scalar<uint8_t>(128), "z");
  Value* ad = b.add(Op(ops::DequantizeLinear{}), {a, s, z}, "ad");
  Value* wd = b.add(
      Op(ops::DequantizeLinear{}),
      {b.constant(filled_i8(Shape{8, 5}, 1), "w"), s, b.constant(Tensor::scalar<int8_t>(0))}, "wd");
  Value* mm = b.add(Op(ops::MatMul{}), {ad, wd}, "mm");
  b.output(b.add(Op(ops::QuantizeLinear{}), {mm, s, z}, "mq"));
  // A Relu before a Q whose zero point is not the lowest value stays f32.
  Value* c = b.add(Op(ops::MatMul{}), {ad, wd}, "mm2");
  Value* r = b.add(Op(ops::Relu{}), {c}, "relu");
  b.output(b.add(Op(ops::QuantizeLinear{}), {r, s, z}, "rq"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_qdq_fusion()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  ASSERT_TRUE(make_dead_code_elimination()->run(g).ok());
  EXPECT_EQ(op_counts(g), (std::map<std::string, int>{{"DequantizeLinear", 2},
                                                      {"MatMul", 1},
                                                      {"QLinearMatMul", 1},
                                                      {"QuantizeLinear", 1},
                                                      {"Relu", 1}}))
      << print_graph(g);
}

// Depthwise Conv -> Clip(0, 6) -> Q, as MobileNetV2's ReLU6 exports; `y_scale` decides whether
// the Q's saturation does the Clip.
void build_conv_clip(Graph& g, float y_scale) {
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, Shape{1, 3, 5, 5}));
  Value* xs = b.constant(Tensor::scalar(0.04f), "xs");
  Value* xz = b.constant(Tensor::scalar<uint8_t>(20), "xz");
  Value* xd = b.add(Op(ops::DequantizeLinear{}), {x, xs, xz}, "xd");
  ops::DequantizeLinear axis0;
  axis0.axis = 0;
  Value* wd = b.add(Op(axis0),
                    {b.constant(filled_i8(Shape{3, 1, 3, 3}, 3), "w"),
                     b.constant(Tensor::from_vector<float>({0.01f, 0.02f, 0.015f}), "ws"),
                     b.constant(Tensor(DType::kI8, Shape{3}), "wz")},
                    "wd");
  ops::Conv conv;
  conv.group = 3;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(conv), {xd, wd}, "conv");
  Value* clip = b.add(
      Op(ops::Clip{}),
      {c, b.constant(Tensor::scalar(0.0f), "lo"), b.constant(Tensor::scalar(6.0f), "hi")}, "relu6");
  Value* ys = b.constant(Tensor::scalar(y_scale), "ys");
  Value* yz = b.constant(Tensor::scalar<uint8_t>(0), "yz");
  b.output(b.add(Op(ops::QuantizeLinear{}), {clip, ys, yz}, "yq"));
}

Tensor u8_input(Shape shape) {
  Tensor x(DType::kU8, std::move(shape));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i * 53 % 256);
  return x;
}

void expect_within_one_step(const Tensor& want, const Tensor& got) {
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_EQ(want.dtype(), DType::kU8);
  int exact = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int d = want.data<uint8_t>()[i] - got.data<uint8_t>()[i];
    EXPECT_LE(std::abs(d), 1) << i;
    exact += d == 0;
  }
  EXPECT_GE(exact, want.numel() * 9 / 10);
}

TEST(QdqFusion, AbsorbsAClipThatTheQuantizationSaturates) {
  // 6 / (6 / 255) = 255: Q saturates exactly where Clip(0, 6) clamps, and zero point 0 is Clip's 0.
  auto g = std::make_shared<Graph>("clip");
  build_conv_clip(*g, 6.0f / 255.0f);
  auto original = std::make_shared<Graph>("clip");
  build_conv_clip(*original, 6.0f / 255.0f);
  ASSERT_TRUE(make_qdq_fusion()->run(*g).ok());
  ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
  EXPECT_EQ(op_counts(*g), (std::map<std::string, int>{{"QLinearConv", 1}})) << print_graph(*g);
  EXPECT_NE(print_graph(*g).find("group=3"), std::string::npos) << print_graph(*g);
  const Tensor x = u8_input(Shape{1, 3, 5, 5});
  expect_within_one_step(run_ref(original, x), run_ref(g, x));

  // With scale 0.05, Q reaches 12.75: values in (6, 12.75] would quantize above Q(6), so the
  // Clip stays.
  Graph wide("wide");
  build_conv_clip(wide, 0.05f);
  ASSERT_TRUE(make_qdq_fusion()->run(wide).ok());
  EXPECT_EQ(op_counts(wide).count("QLinearConv"), 0u) << print_graph(wide);
  EXPECT_EQ(op_counts(wide)["Clip"], 1) << print_graph(wide);
}

// Conv -> Relu (or Clip(0, 6)) -> Q(int8, zero point 0): symmetric activations, as kiln's own
// calibration writes them for cuda. The Q's saturation does not clamp at the zero point, so the
// ReLU runs on the int8 values after the QLinearConv (Relu(Q(y)) is Q(Relu(y)) exactly).
void build_conv_symmetric(Graph& g, bool clip, float y_scale) {
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, Shape{1, 3, 5, 5}));
  Value* xs = b.constant(Tensor::scalar(0.04f), "xs");
  Value* xz = b.constant(Tensor::scalar<uint8_t>(128), "xz");
  Value* xd = b.add(Op(ops::DequantizeLinear{}), {x, xs, xz}, "xd");
  ops::DequantizeLinear axis0;
  axis0.axis = 0;
  Value* wd = b.add(Op(axis0),
                    {b.constant(filled_i8(Shape{4, 3, 3, 3}, 3), "w"),
                     b.constant(Tensor::from_vector<float>({0.01f, 0.02f, 0.015f, 0.005f}), "ws"),
                     b.constant(Tensor(DType::kI8, Shape{4}), "wz")},
                    "wd");
  ops::Conv conv;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(conv), {xd, wd}, "conv");
  Value* r = clip ? b.add(Op(ops::Clip{}),
                          {c, b.constant(Tensor::scalar(0.0f), "lo"),
                           b.constant(Tensor::scalar(6.0f), "hi")},
                          "relu6")
                  : b.add(Op(ops::Relu{}), {c}, "relu");
  Value* ys = b.constant(Tensor::scalar(y_scale), "ys");
  Value* yz = b.constant(Tensor::scalar<int8_t>(0), "yz");
  b.output(b.add(Op(ops::QuantizeLinear{}), {r, ys, yz}, "yq"));
}

TEST(QdqFusion, RunsTheReluBeforeASymmetricQOnTheInt8Values) {
  for (const auto& [clip, y_scale, fuses] :
       {std::tuple{false, 0.05f, true}, std::tuple{true, 6.0f / 127.0f, true},
        std::tuple{true, 0.1f, false}}) {  // 0.1: Q(6) = 60 clamps inside the range: Clip stays
    SCOPED_TRACE(std::string(clip ? "clip " : "relu ") + std::to_string(y_scale));
    auto g = std::make_shared<Graph>("sym");
    build_conv_symmetric(*g, clip, y_scale);
    auto original = std::make_shared<Graph>("sym");
    build_conv_symmetric(*original, clip, y_scale);
    ASSERT_TRUE(make_qdq_fusion()->run(*g).ok());
    ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
    if (!fuses) {
      EXPECT_EQ(op_counts(*g).count("QLinearConv"), 0u) << print_graph(*g);
      continue;
    }
    EXPECT_EQ(op_counts(*g), (std::map<std::string, int>{{"QLinearConv", 1}, {"Relu", 1}}))
        << print_graph(*g);
    const Tensor x = u8_input(Shape{1, 3, 5, 5});
    const Tensor want = run_ref(original, x);
    const Tensor got = run_ref(g, x);
    ASSERT_EQ(got.dtype(), DType::kI8);
    ASSERT_EQ(want.shape(), got.shape());
    int exact = 0, zeros = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const int w = want.data<int8_t>()[i], v = got.data<int8_t>()[i];
      EXPECT_LE(std::abs(w - v), 1) << i;
      EXPECT_GE(v, 0) << i;
      exact += w == v;
      zeros += v == 0;
    }
    EXPECT_GE(exact, want.numel() * 9 / 10);
    EXPECT_GT(zeros, 0);  // the ReLU clamped something
  }
}

// A target whose int8 kernels take group 1 and depthwise only (cuda) keeps other grouped
// convolutions in QDQ form; a depthwise one still fuses.
TEST(QdqFusion, LeavesGroupedConvolutionsToTargetsThatDoNotAskForThem) {
  Graph depthwise("clip");
  build_conv_clip(depthwise, 6.0f / 255.0f);
  ASSERT_TRUE(make_qdq_fusion(/*max_pools=*/false, /*grouped_convs=*/false)->run(depthwise).ok());
  EXPECT_EQ(op_counts(depthwise)["QLinearConv"], 1) << print_graph(depthwise);

  Graph g("grouped");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, Shape{1, 4, 5, 5}));
  Value* s = b.constant(Tensor::scalar(0.04f), "s");
  Value* z = b.constant(Tensor::scalar<uint8_t>(128), "z");
  Value* xd = b.add(Op(ops::DequantizeLinear{}), {x, s, z}, "xd");
  Value* wd = b.add(Op(ops::DequantizeLinear{}),
                    {b.constant(filled_i8(Shape{4, 2, 3, 3}, 3), "w"),
                     b.constant(Tensor::scalar(0.01f), "ws"),
                     b.constant(Tensor::scalar<int8_t>(0), "wz")},
                    "wd");
  ops::Conv conv;
  conv.group = 2;
  Value* c = b.add(Op(conv), {xd, wd}, "conv");
  b.output(b.add(Op(ops::QuantizeLinear{}), {c, s, z}, "yq"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  ASSERT_TRUE(make_qdq_fusion(/*max_pools=*/false, /*grouped_convs=*/false)->run(g).ok());
  EXPECT_EQ(op_counts(g).count("QLinearConv"), 0u) << print_graph(g);
  EXPECT_EQ(op_counts(g)["Conv"], 1) << print_graph(g);
}

// Conv(+bias) -> SiLU (x * Sigmoid(x)) -> Q(int8, zero point 0), as EfficientNet's blocks are
// quantized by kiln's own calibration for cuda; `also_returned` makes the Conv's output a graph
// output too (then nothing fuses).
void build_conv_silu(Graph& g, bool also_returned) {
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, Shape{1, 3, 5, 5}));
  Value* xd = b.add(
      Op(ops::DequantizeLinear{}),
      {x, b.constant(Tensor::scalar(0.04f), "xs"), b.constant(Tensor::scalar<uint8_t>(128), "xz")},
      "xd");
  ops::DequantizeLinear axis0;
  axis0.axis = 0;
  Value* wd = b.add(Op(axis0),
                    {b.constant(filled_i8(Shape{4, 3, 3, 3}, 5), "w"),
                     b.constant(Tensor::from_vector<float>({0.01f, 0.02f, 0.015f, 0.005f}), "ws"),
                     b.constant(Tensor(DType::kI8, Shape{4}), "wz")},
                    "wd");
  ops::Conv conv;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* bias = b.constant(Tensor::from_vector<float>({0.3f, -0.2f, 0.05f, -1.0f}), "bias");
  Value* c = b.add(Op(conv), {xd, wd, bias}, "conv");
  Value* gate = b.add(Op(ops::Sigmoid{}), {c}, "gate");
  Value* silu = b.add(Op(ops::Mul{}), {c, gate}, "silu");
  b.output(b.add(
      Op(ops::QuantizeLinear{}),
      {silu, b.constant(Tensor::scalar(0.03f), "ys"), b.constant(Tensor::scalar<int8_t>(0), "yz")},
      "yq"));
  if (also_returned) b.output(c);
}

// For a target whose int8 convolutions apply a SiLU (cuda), Q(SiLU(Conv)) is one QLinearConv with
// kiln's activation "SiLU", computing what the float graph did within one step; only where the
// target says it takes that Conv, and never when something else reads the Conv's output.
TEST(QdqFusion, FoldsASiluBeforeTheQIntoTheConvolutionForTargetsThatAskForIt) {
  auto g = std::make_shared<Graph>("silu");
  build_conv_silu(*g, false);
  auto original = std::make_shared<Graph>("silu");
  build_conv_silu(*original, false);
  int asked = 0;
  auto takes = [&asked](const Node& conv) {
    EXPECT_EQ(conv.kind(), OpKind::kConv);
    ++asked;
    return true;
  };
  ASSERT_TRUE(make_qdq_fusion(false, false, takes)->run(*g).ok());
  ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
  EXPECT_GE(asked, 1);
  EXPECT_EQ(op_counts(*g), (std::map<std::string, int>{{"QLinearConv", 1}})) << print_graph(*g);
  for (const auto& node : g->nodes()) {
    if (node->kind() == OpKind::kQLinearConv) {
      EXPECT_EQ(node->attrs<ops::QLinearConv>().activation, std::optional<std::string>("SiLU"));
    }
  }
  const Tensor x = u8_input(Shape{1, 3, 5, 5});
  const Tensor want = run_ref(original, x);
  const Tensor got = run_ref(g, x);
  ASSERT_EQ(got.dtype(), DType::kI8);
  ASSERT_EQ(want.shape(), got.shape());
  int exact = 0, negative = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int w = want.data<int8_t>()[i], v = got.data<int8_t>()[i];
    EXPECT_LE(std::abs(w - v), 1) << i;
    exact += w == v;
    negative += v < 0;
  }
  EXPECT_GE(exact, want.numel() * 9 / 10);
  EXPECT_GT(negative, 0);  // SiLU's dip below zero survived: not a ReLU

  for (const bool also_returned : {false, true}) {
    Graph kept("silu");
    build_conv_silu(kept, also_returned);
    auto refuses = [](const Node&) { return false; };
    ASSERT_TRUE(make_qdq_fusion(false, false,
                                also_returned ? std::function<bool(const Node&)>(takes) : refuses)
                    ->run(kept)
                    .ok());
    EXPECT_EQ(op_counts(kept).count("QLinearConv"), 0u) << print_graph(kept);
  }
}

// torch's export of a quantized Linear on [B, S, K]: MatMul(DQ(x), Transpose(DQ(w))) + DQ(bias).
void build_linear(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, Shape{2, 3, 8}));
  const float xs_v = 0.05f;
  Value* xs = b.constant(Tensor::scalar(xs_v), "xs");
  Value* xz = b.constant(Tensor::scalar<uint8_t>(128), "xz");
  Value* xd = b.add(Op(ops::DequantizeLinear{}), {x, xs, xz}, "xd");
  ops::DequantizeLinear axis0;
  axis0.axis = 0;
  const std::vector<float> ws = {0.01f, 0.02f, 0.015f, 0.03f, 0.005f};
  Value* wd = b.add(
      Op(axis0),
      {b.constant(filled_i8(Shape{5, 8}, 7), "w"), b.constant(Tensor::from_vector<float>(ws), "ws"),
       b.constant(Tensor(DType::kI8, Shape{5}), "wz")},
      "wd");
  ops::Transpose t;
  t.perm = std::vector<int64_t>{1, 0};
  Value* wt = b.add(Op(t), {wd}, "wt");
  Value* mm = b.add(Op(ops::MatMul{}), {xd, wt}, "mm");
  std::vector<float> bs;
  for (float s : ws) bs.push_back(xs_v * s);
  Value* bd = b.add(
      Op(axis0),
      {b.constant(Tensor::from_vector<int32_t>({300, -120, 7, 0, 999}), "b"),
       b.constant(Tensor::from_vector<float>(bs), "bs"), b.constant(Tensor(DType::kI32, Shape{5}))},
      "bd");
  Value* add = b.add(Op(ops::Add{}), {mm, bd}, "add");
  b.output(b.add(Op(ops::QuantizeLinear{}),
                 {add, b.constant(Tensor::scalar(0.04f), "ys"),
                  b.constant(Tensor::scalar<uint8_t>(120), "yz")},
                 "yq"));
}

TEST(QdqFusion, RewritesATorchLinearToAOneByOneQLinearConv) {
  auto g = std::make_shared<Graph>("linear");
  build_linear(*g);
  auto original = std::make_shared<Graph>("linear");
  build_linear(*original);
  ASSERT_TRUE(make_qdq_fusion()->run(*g).ok());
  ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
  EXPECT_EQ(op_counts(*g), (std::map<std::string, int>{{"QLinearConv", 1}, {"Reshape", 2}}))
      << print_graph(*g);
  const Tensor x = u8_input(Shape{2, 3, 8});
  const Tensor want = run_ref(original, x);
  EXPECT_EQ(want.shape(), (Shape{2, 3, 5}));
  expect_within_one_step(want, run_ref(g, x));
}

}  // namespace
}  // namespace kiln::compiler
