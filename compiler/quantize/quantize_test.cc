// SPDX-License-Identifier: Apache-2.0
// fp16/bf16 conversion and int8 QDQ rewriting: the IR before and after, and the numbers.
#include "compiler/quantize/quantize.h"

#include <map>
#include <random>

#include "compiler/passes/pass_test_util.h"
#include "compiler/quantize/calibration.h"

namespace kiln::compiler {
namespace {

using testing::f32;

Tensor filled(Shape shape, uint64_t seed, float lo, float hi) {
  Tensor t(DType::kF32, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// x[2,4] -> MatMul(w) -> Relu -> Softmax -> y, and Relu's output also returned as r.
void build_mlp(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 4}));
  Value* w = b.constant(filled(Shape{4, 3}, 1, -1, 1), "w");
  Value* h = b.add(Op(ops::MatMul{}), {x, w}, "mm");
  Value* r = b.add(Op(ops::Relu{}), {h}, "r");
  b.output(b.add(Op(ops::Softmax{}), {r}, "y"));
  b.output(r);
}

std::vector<Argument> run(std::shared_ptr<Graph> g, std::vector<Argument> inputs) {
  auto target = make_target("ref");
  auto exe = compile(std::move(g), **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  auto out = (*exe)->run(std::move(inputs));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? std::move(out).value() : std::vector<Argument>{};
}

// Executable::run_ranges (what int8 calibration's max method reads): each float output's least
// and greatest value and its size, NaNs left out; an integer output has count 0.
TEST(RunRanges, GiveEachFloatOutputsExtremes) {
  auto g = std::make_shared<Graph>("ranges");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({2, 4}));
  b.output(b.add(Op(ops::Relu{}), {x}, "r"));
  b.output(b.add(Op(ops::Neg{}), {x}, "n"));
  b.output(b.add(Op(ops::Shape{}), {x}, "s"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto target = make_target("ref");
  auto exe = compile(g, **target);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  Tensor in = Tensor::from_vector<float>({-3, 1.5f, NAN, 7, 0, -0.25f, 2, 4}).reshaped(Shape{2, 4});
  Result<std::vector<OutputRange>> r = (*exe)->run_ranges({Argument(in)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].min, 0.0);
  EXPECT_EQ((*r)[0].max, 7.0);
  EXPECT_EQ((*r)[0].count, 8);
  EXPECT_EQ((*r)[1].min, -7.0);
  EXPECT_EQ((*r)[1].max, 3.0);
  EXPECT_EQ((*r)[2].count, 0);
}

TEST(FloatPrecision, CastsOnlyAtRegionEdgesAndKeepsSoftmaxInF32) {
  Graph g("mlp");
  build_mlp(g);
  auto pass = make_float_precision_conversion(DType::kBF16);
  testing::expect_rewrite(g, *pass,
                          "graph mlp(%x: f32[2,4]) {\n"
                          "  %w: f32[4,3] = Constant[value=f32[4,3]]()  # \"w\"\n"
                          "  %mm: f32[2,3] = MatMul(%x, %w)  # \"mm\"\n"
                          "  %r: f32[2,3] = Relu(%mm)  # \"r\"\n"
                          "  %y: f32[2,3] = Softmax[axis=-1](%r)  # \"y\"\n"
                          "  return %y, %r\n"
                          "}\n",
                          "graph mlp(%x: f32[2,4]) {\n"
                          "  %x_bf16: bf16[2,4] = Cast[to=bf16](%x)  # \"x_bf16\"\n"
                          "  %w_bf16: bf16[4,3] = Constant[value=bf16[4,3]]()  # \"w_bf16\"\n"
                          "  %mm: bf16[2,3] = MatMul(%x_bf16, %w_bf16)  # \"mm\"\n"
                          "  %r_bf16: bf16[2,3] = Relu(%mm)  # \"r\"\n"
                          "  %r: f32[2,3] = Cast[to=f32](%r_bf16)  # \"r_f32\"\n"
                          "  %y: f32[2,3] = Softmax[axis=-1](%r)  # \"y\"\n"
                          "  return %y, %r\n"
                          "}\n");
}

TEST(FloatPrecision, ConvertedGraphComputesCloseValues) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto plain = std::make_shared<Graph>("mlp");
    auto narrow = std::make_shared<Graph>("mlp");
    build_mlp(*plain);
    build_mlp(*narrow);
    Status s = dtype == DType::kF16 ? quantize_fp16(*narrow) : quantize_bf16(*narrow);
    ASSERT_TRUE(s.ok()) << s.to_string();
    Tensor x = filled(Shape{2, 4}, 3, -2, 2);
    auto want = run(plain, {Argument(x)});
    auto got = run(narrow, {Argument(x)});
    ASSERT_EQ(got.size(), 2u);
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ(got[o].tensor().dtype(), DType::kF32);
      auto a = want[o].tensor().span<float>();
      auto b = got[o].tensor().span<float>();
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max<double>(worst, std::abs(a[i] - b[i]));
      // bf16 keeps 8 bits of mantissa, fp16 11; the values are O(1).
      EXPECT_LT(worst, dtype == DType::kBF16 ? 3e-2 : 4e-3) << dtype_name(dtype);
      EXPECT_GT(worst, 0.0) << "nothing was converted for " << dtype_name(dtype);
    }
  }
}

TEST(FloatPrecision, OpListSelectsAndRejects) {
  Graph g("mlp");
  build_mlp(g);
  ASSERT_TRUE(quantize_fp16(g, {"Relu"}).ok());
  const std::string ir = print_graph(g);
  EXPECT_NE(ir.find("%mm: f32[2,3] = MatMul"), std::string::npos) << ir;
  EXPECT_NE(ir.find("= Relu(%mm_f16)"), std::string::npos) << ir;
  Result<std::vector<OpKind>> bad = resolve_quantize_ops({"Conv", "Frobnicate"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"Frobnicate\""), std::string::npos);
  EXPECT_FALSE(resolve_quantize_ops({"Cast"}).ok());
  EXPECT_EQ(resolve_quantize_ops({"dot"})->size(), 2u);
}

// x[N,2,5,5] -> Conv(3 out channels, 3x3, bias) -> Relu -> Flatten -> Gemm(transB) -> y
void build_convnet(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 2, 5, 5}));
  Value* w = b.constant(filled(Shape{3, 2, 3, 3}, 11, -0.5f, 0.5f), "w");
  Value* bias = b.constant(filled(Shape{3}, 12, -0.1f, 0.1f), "b");
  Value* c = b.add(Op(ops::Conv{}), {x, w, bias}, "conv");
  Value* r = b.add(Op(ops::Relu{}), {c}, "relu");
  Value* f = b.add(Op(ops::Flatten{}), {r}, "flat");
  Value* fc = b.constant(filled(Shape{4, 27}, 13, -0.3f, 0.3f), "fc");
  ops::Gemm gemm;
  gemm.transB = 1;
  b.output(b.add(Op(gemm), {f, fc}, "y"));
}

std::vector<CalibrationBatch> batches(int count) {
  std::vector<CalibrationBatch> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({{"x", filled(Shape{2, 2, 5, 5}, 100 + i, -1.0f, 2.0f)}});
  }
  return out;
}

TEST(Int8, WritesQdqWithPerChannelWeightsAndCalibratedScales) {
  Graph g("convnet");
  build_convnet(g);
  auto target = make_target("ref");
  std::vector<CalibrationBatch> data = batches(3);
  int64_t reported = 0;
  Int8Options options;
  options.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 3);
    reported = done;
  };
  Result<Int8Report> report = quantize_int8(g, **target, data, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(reported, 3);
  // The Conv, the Gemm, and the Flatten between them (which moves 8-bit data).
  EXPECT_EQ(report->quantized_nodes, 3);
  ASSERT_EQ(report->activations.size(), 3u);
  // x is signed: s8 with scale max|x| / 127 over all batches.
  double max_abs = 0;
  for (const auto& batch : data) {
    for (float v : batch.at("x").span<float>()) max_abs = std::max<double>(max_abs, std::abs(v));
  }
  EXPECT_FALSE(report->activations[0].is_unsigned);
  EXPECT_FLOAT_EQ(report->activations[0].scale, static_cast<float>(max_abs / 127));
  // The Flatten's input comes after Relu: u8; the Flatten's output, which the Gemm reads, takes
  // its scale.
  EXPECT_EQ(report->activations[1].value, "relu");
  EXPECT_TRUE(report->activations[1].is_unsigned);
  EXPECT_EQ(report->activations[1].min, 0.0);
  EXPECT_EQ(report->activations[2].value, "flat");
  EXPECT_EQ(report->activations[2].scale, report->activations[1].scale);
  EXPECT_TRUE(report->activations[2].is_unsigned);

  const std::string ir = print_graph(g);
  EXPECT_NE(ir.find("%x_QuantizeLinear: i8[2,2,5,5] = QuantizeLinear[axis=1](%x, %x_scale, "
                    "%x_zero_point)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("%w_quantized: i8[3,2,3,3] = Constant"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%w_DequantizeLinear: f32[3,2,3,3] = DequantizeLinear[axis=0]("
                    "%w_quantized, %w_scale, %w_zero_point)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("u8[2,27] = QuantizeLinear"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%fc_DequantizeLinear: f32[4,27] = DequantizeLinear[axis=0]"),
            std::string::npos)
      << ir;
  EXPECT_TRUE(verify_graph(g).ok());
}

// x -> Conv -> Relu -> MaxPool -> Conv (c1) -> Add(c1, pooled) -> Relu -> Conv -> GAP, plus a
// second Add of two activations whose output only a Softmax reads.
void build_residual(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 4, 8, 8}));
  auto conv = [&](Value* in, int64_t out, int seed, const std::string& name) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    const int64_t in_channels = in->tensor_type().shape()[1];
    Value* w = b.constant(filled(Shape{out, in_channels, 3, 3}, seed, -0.3f, 0.3f), name + "_w");
    return b.add(Op(op), {in, w}, name);
  };
  Value* stem = b.add(Op(ops::Relu{}), {conv(x, 8, 1, "stem")}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  Value* pooled = b.add(Op(pool), {stem}, "pool");
  Value* c1 = conv(pooled, 8, 2, "c1");
  Value* sum = b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {c1, pooled}, "add")}, "add_relu");
  Value* c2 = conv(sum, 8, 3, "c2");
  b.output(b.add(Op(ops::GlobalAveragePool{}), {c2}, "gap"));
  Value* other = b.add(Op(ops::Add{}), {c1, c2}, "float_add");
  b.output(b.add(Op(ops::Softmax{}), {other}, "soft"));
}

TEST(Int8, QuantizesResidualAddsPoolsAndWhatEndsInAnInt8Reader) {
  Graph g("residual");
  build_residual(g);
  auto target = make_target("ref");
  std::vector<CalibrationBatch> data;
  for (int i = 0; i < 2; ++i) data.push_back({{"x", filled(Shape{1, 4, 8, 8}, 50 + i, -1, 1)}});
  Result<Int8Report> report = quantize_int8(g, **target, data);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  std::map<std::string, ActivationScale> scales;
  for (const ActivationScale& a : report->activations) scales[a.value] = a;
  // Read in int8: the convolutions' inputs, the MaxPool's, both of the residual Add's and the
  // GlobalAveragePool's; not the Add only a Softmax reads.
  for (const char* v : {"x", "stem_relu", "pool", "c1", "add_relu", "c2"}) {
    EXPECT_EQ(scales.count(v), 1u) << v;
  }
  EXPECT_EQ(scales.size(), 6u);
  EXPECT_EQ(scales["pool"].scale, scales["stem_relu"].scale);  // the MaxPool moves 8-bit data
  EXPECT_TRUE(scales["add_relu"].is_unsigned);
  EXPECT_FALSE(scales["c1"].is_unsigned);
  // Conv x3, MaxPool, the residual Add, GlobalAveragePool.
  EXPECT_EQ(report->quantized_nodes, 6);
  const std::string ir = print_graph(g);
  EXPECT_NE(ir.find("= Add(%c1_DequantizeLinear, %pool_DequantizeLinear)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("%float_add: f32[1,8,4,4] = Add(%c1, %c2)"), std::string::npos) << ir;
  EXPECT_TRUE(verify_graph(g).ok());
}

// Symmetric activations (the cuda target's default): every pair s8 with zero point 0, the
// never-negative ones too, scale = max|x| / 127.
// build_residual's graph quantized on ref with `options`, calibrated on one batch.
Result<Int8Report> quantize_residual(Graph& g, const Int8Options& options) {
  build_residual(g);
  auto target = make_target("ref");
  std::vector<CalibrationBatch> data = {{{"x", filled(Shape{1, 4, 8, 8}, 7, -1, 1)}}};
  return quantize_int8(g, **target, data, options);
}

TEST(Int8, SymmetricActivationsAreSignedWithZeroPointZero) {
  Graph g("residual");
  Int8Options options;
  options.symmetric_activations = true;
  Result<Int8Report> report = quantize_residual(g, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (const ActivationScale& a : report->activations) {
    EXPECT_FALSE(a.is_unsigned) << a.value;
    EXPECT_FLOAT_EQ(a.scale, static_cast<float>(a.threshold / 127.0)) << a.value;
  }
  EXPECT_EQ(print_graph(g).find("u8["), std::string::npos) << print_graph(g);
}

// dequantize_every_reader (the cuda target's default): a float reader of a quantized activation
// reads its DequantizeLinear too, as ONNX Runtime places the pairs; the int8 readers are the same.
TEST(Int8, EveryReaderReadsTheDequantizedValueWhenAsked) {
  Graph g("residual");
  Int8Options options;
  options.dequantize_every_reader = true;
  Result<Int8Report> report = quantize_residual(g, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->quantized_nodes, 6);
  const std::string ir = print_graph(g);
  EXPECT_NE(ir.find("%float_add: f32[1,8,4,4] = Add(%c1_DequantizeLinear, %c2_DequantizeLinear)"),
            std::string::npos)
      << ir;
  EXPECT_TRUE(verify_graph(g).ok());
}

TEST(Int8, ExcludedNodesAndOpsStayInFloat) {
  for (const std::vector<std::string>& exclude :
       std::vector<std::vector<std::string>>{{"add"}, {"Add"}}) {
    Graph g("residual");
    Int8Options options;
    options.exclude = exclude;
    Result<Int8Report> report = quantize_residual(g, options);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    const std::string ir = print_graph(g);
    EXPECT_EQ(ir.find("%c1_QuantizeLinear"), std::string::npos) << ir;
    EXPECT_NE(ir.find("= Add(%c1, %pool)"), std::string::npos) << ir;
    EXPECT_EQ(report->quantized_nodes, 5);  // the Add is left out
  }
}

// An earlier calibration's ranges quantize the same graph again without batches, with other
// nodes excluded too (kiln verify --per-layer); a value they lack needs batches again.
TEST(Int8, ObservedRangesQuantizeAgainWithoutCalibrating) {
  Graph first("residual");
  Result<Int8Report> calibrated = quantize_residual(first, {});
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().to_string();
  EXPECT_EQ(calibrated->quantized_names, (std::vector<std::string>{"stem", "c1", "c2"}));
  ASSERT_NE(calibrated->observed, nullptr);
  // Every placed value, the pool's output too (its scale is its input's, its threshold the larger).
  EXPECT_EQ(calibrated->observed->values.size(), 6u);
  auto target = make_target("ref");
  Graph again("residual");
  build_residual(again);
  Int8Options options;
  options.observed = calibrated->observed;
  Result<Int8Report> reused = quantize_int8(again, **target, {}, options);
  ASSERT_TRUE(reused.ok()) << reused.status().to_string();
  EXPECT_EQ(reused->batches, 0);
  EXPECT_EQ(print_graph(again), print_graph(first));
  Graph without_c1("residual");
  build_residual(without_c1);
  options.exclude = {"c1"};
  Result<Int8Report> kept = quantize_int8(without_c1, **target, {}, options);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->quantized_names, (std::vector<std::string>{"stem", "c2"}));
  EXPECT_NE(print_graph(without_c1)
                .find("= Conv[auto_pad=\"NOTSET\", group=1, pads=[1,1,1,1]](%pool, %c1_w)"),
            std::string::npos)
      << print_graph(without_c1);
  Graph unknown("residual");
  build_residual(unknown);
  Int8Options empty;
  empty.observed = std::make_shared<ObservedRanges>();
  Result<Int8Report> missing = quantize_int8(unknown, **target, {}, empty);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("no calibration data"), std::string::npos);
}

// A MaxPool's output takes its input's scale; with entropy (or percentile) the threshold is the
// larger of the two values' own choices, so the pooled values, the input's tail, are not cut.
TEST(Int8, APoolsGroupTakesTheLargestThresholdOfItsMembers) {
  Graph g("residual");
  build_residual(g);
  auto target = make_target("ref");
  std::vector<CalibrationBatch> data;
  for (int i = 0; i < 4; ++i) data.push_back({{"x", filled(Shape{1, 4, 8, 8}, 90 + i, -1, 1)}});
  Int8Options options;
  options.method = CalibrationMethod::kEntropy;
  Result<Int8Report> report = quantize_int8(g, **target, data, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  std::map<std::string, ActivationScale> scales;
  for (const ActivationScale& a : report->activations) scales[a.value] = a;
  const auto& observed = report->observed->values;
  const int levels = scales["stem_relu"].is_unsigned ? 256 : 128;
  const double input_alone =
      observed.at("stem_relu").threshold(CalibrationMethod::kEntropy, 0, levels);
  const double output_alone = observed.at("pool").threshold(CalibrationMethod::kEntropy, 0, levels);
  EXPECT_DOUBLE_EQ(scales["stem_relu"].threshold, std::max(input_alone, output_alone));
  EXPECT_EQ(scales["pool"].scale, scales["stem_relu"].scale);
}

TEST(Int8, QuantizedGraphStaysCloseToFp32) {
  auto plain = std::make_shared<Graph>("convnet");
  auto quantized = std::make_shared<Graph>("convnet");
  build_convnet(*plain);
  build_convnet(*quantized);
  auto target = make_target("ref");
  for (CalibrationMethod method :
       {CalibrationMethod::kMax, CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    auto q = std::make_shared<Graph>("convnet");
    build_convnet(*q);
    Int8Options options;
    options.method = method;
    options.percentile = 99.9;
    ASSERT_TRUE(quantize_int8(*q, **target, batches(4), options).ok());
    Tensor x = filled(Shape{2, 2, 5, 5}, 999, -1.0f, 2.0f);
    auto want = run(plain, {Argument(x)});
    auto got = run(q, {Argument(x)});
    auto a = want[0].tensor().span<float>();
    auto b = got[0].tensor().span<float>();
    double worst = 0;
    double largest = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max<double>(worst, std::abs(a[i] - b[i]));
      largest = std::max<double>(largest, std::abs(a[i]));
    }
    EXPECT_LT(worst, 0.03 * largest) << calibration_method_name(method);
    EXPECT_GT(worst, 0.0) << calibration_method_name(method);
  }
}

TEST(Int8, MissingCalibrationInputIsNamed) {
  Graph g("convnet");
  build_convnet(g);
  auto target = make_target("ref");
  std::vector<CalibrationBatch> data = {{{"image", filled(Shape{2, 2, 5, 5}, 1, 0, 1)}}};
  Result<Int8Report> report = quantize_int8(g, **target, data);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("calibration batch 0: no tensor for input \"x\" (the "
                                           "batch has: image)"),
            std::string::npos)
      << report.status().message();
  Int8Options options;
  options.ops = {"Relu"};
  EXPECT_FALSE(quantize_int8(g, **target, batches(1), options).ok());
}

}  // namespace
}  // namespace kiln::compiler
