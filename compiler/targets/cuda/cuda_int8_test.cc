// SPDX-License-Identifier: Apache-2.0
// The int8 path of the cuda target (QLinearConv and the QDQ patterns around it) against ref, and
// the own int8 kernel against the host, within one quantization step (fixed seeds); every case
// skips where no GPU is present.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "compiler/ir/printer.h"
#include "compiler/quantize/quantize.h"
#include "compiler/targets/cuda/cuda_testing.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "compiler/targets/cuda/kernels/int8_gemm.h"

namespace kiln::compiler {
namespace {

// ---- int8 (QLinearConv and the QDQ patterns around it) ----

template <class T>
Tensor random_ints(Shape shape, int lo, int hi, uint32_t seed) {
  Tensor t(std::is_same_v<T, uint8_t>  ? DType::kU8
           : std::is_same_v<T, int8_t> ? DType::kI8
                                       : DType::kI32,
           std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (T& v : t.span<T>()) v = static_cast<T>(dist(rng));
  return t;
}

Tensor channel_scales(int64_t n, uint32_t seed) {
  Tensor t(DType::kF32, Shape{n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.002f, 0.01f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// Q(Conv(DQ(x), DQ(w), bias)) as QLinearConv: s8 weights [k, c, r, s] with per-channel scales,
// an int32 bias, output u8 with scale `ys` and zero point `yz` (0: the Relu's saturation).
Value* qconv(GraphBuilder& b, Value* x, float xs, uint8_t xz, int64_t k, int64_t c, int64_t r,
             int64_t stride, float ys, uint8_t yz, uint32_t seed) {
  ops::QLinearConv op;
  const int64_t pad = r / 2;
  op.pads = std::vector<int64_t>{pad, pad, pad, pad};
  op.strides = std::vector<int64_t>{stride, stride};
  return b.add(Op(op),
               {x, b.constant(Tensor::scalar(xs)), b.constant(Tensor::scalar<uint8_t>(xz)),
                b.constant(random_ints<int8_t>(Shape{k, c, r, r}, -127, 127, seed)),
                b.constant(channel_scales(k, seed + 1)), b.constant(Tensor(DType::kI8, Shape{k})),
                b.constant(Tensor::scalar(ys)), b.constant(Tensor::scalar<uint8_t>(yz)),
                b.constant(random_ints<int32_t>(Shape{k}, -2000, 2000, seed + 2))});
}

// `got` against `want` (u8 or f32 in steps of `step`): at most `worst` steps apart, at most
// `off_fraction` of the elements differing by a step or more, and not a constant output.
void expect_within_steps(const Tensor& want, const Tensor& got, double step, double worst,
                         double off_fraction = 0.01) {
  ASSERT_EQ(want.dtype(), got.dtype());
  ASSERT_EQ(want.shape(), got.shape());
  auto at = [](const Tensor& t, int64_t i) {
    return t.dtype() == DType::kU8 ? static_cast<double>(t.data<uint8_t>()[i])
                                   : static_cast<double>(t.data<float>()[i]);
  };
  int64_t off = 0;
  double max_diff = 0;
  double lo = INFINITY;
  double hi = -INFINITY;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::abs(at(want, i) - at(got, i)) / step;
    off += d >= 0.5 ? 1 : 0;
    max_diff = std::max(max_diff, d);
    lo = std::min(lo, at(want, i));
    hi = std::max(hi, at(want, i));
  }
  EXPECT_LE(max_diff, worst);
  EXPECT_LE(static_cast<double>(off), off_fraction * static_cast<double>(want.numel()))
      << off << " of " << want.numel() << " differ";
  EXPECT_GT(hi - lo, 20 * step) << "a degenerate case: the output is nearly constant";
}

TEST(CudaInt8, QLinearConvMatchesRefWithinOneStep) {
  SKIP_WITHOUT_GPU();
  // A u8 input (converted to s8 on the device), 3x3 64 -> 64 and a strided 1x1 64 -> 128, output
  // zero point 128: the tensor-core int8 convolution with per-channel requantization and bias.
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 14, 14}, 0, 127, 41);
  auto build = [](GraphBuilder& b, Value* in) {
    Value* y = qconv(b, in, 0.02f, 128, 64, 64, 3, 1, 0.25f, 128, 42);
    return qconv(b, y, 0.25f, 128, 128, 64, 1, 2, 0.5f, 128, 45);
  };
  auto [ref_exe, want] = run_one("ref", x, build);
  auto [exe, got] = run_one("cuda", x, build);
  ASSERT_NE(exe, nullptr);
  expect_within_steps(want, got, 1.0, 1.0);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  // cuDNN's or, for the 1x1, the own kernel's ("QLinearConv int8 gemm").
  EXPECT_EQ(steps_starting(*program, "QLinearConv int8"), 2) << print_graph(exe->graph());
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, QuantizedStemAndMaxPoolMatchRef) {
  SKIP_WITHOUT_GPU();
  // f32 image -> Q (u8, zero point 128; centered f16 integers on the device) -> conv 7x7/2 on f16
  // tensor cores -> MaxPool between DQ and Q -> DQ -> f32.
  const Tensor x = random_tensor(Shape{2, 3, 32, 32}, 71);
  // u8 activations with zero point 128, which the centered s8 form holds exactly (other u8 zero
  // points, which it cannot, take the float path, as the differential tester's qdq patterns
  // showed).
  const float scale = 0.2f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* image = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.0157f)),
                                                     b.constant(Tensor::scalar<uint8_t>(128))});
    Value* stem = qconv(b, image, 0.0157f, 128, 64, 3, 7, 2, scale, 128, 72);
    Value* s = b.constant(Tensor::scalar(scale));
    Value* z = b.constant(Tensor::scalar<uint8_t>(128));
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* pooled = b.add(Op(mp), {b.add(Op(ops::DequantizeLinear{}), {stem, s, z})});
    Value* q = b.add(Op(ops::QuantizeLinear{}), {pooled, s, z});
    b.output(b.add(Op(ops::DequantizeLinear{}), {q, s, z}));
    // A 2x2/1 pool too (the kernel's runtime window; 3x3 is unrolled), after a 3x3/1
    // convolution of its own (f16, 8 channels): an int8 MaxPool needs its convolution's output
    // to have one reader.
    // Other parameters than the first QuantizeLinear's, which it would otherwise merge with.
    Value* image2 = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.0156f)),
                                                      b.constant(Tensor::scalar<uint8_t>(60))});
    Value* conv2 = qconv(b, image2, 0.0156f, 60, 64, 3, 3, 1, scale, 128, 73);
    ops::MaxPool mp2;
    mp2.kernel_shape = std::vector<int64_t>{2, 2};
    Value* pooled2 = b.add(Op(mp2), {b.add(Op(ops::DequantizeLinear{}), {conv2, s, z})});
    Value* q2 = b.add(Op(ops::QuantizeLinear{}), {pooled2, s, z});
    b.output(b.add(Op(ops::DequantizeLinear{}), {q2, s, z}));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, {x});
  // On cuDNN's f16 graph (KILN_CUDA_INT8_GEMM=0) and on the own s8 kernel (=1).
  for (const char* mode : {"0", "1"}) {
    SCOPED_TRACE(fmt::format("KILN_CUDA_INT8_GEMM={}", mode));
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph({x}, build), "KILN_CUDA_INT8_GEMM", mode);
    ASSERT_NE(exe, nullptr);
    const std::vector<Tensor> got = run(*exe, {x});
    expect_within_steps(want[0], got[0], scale, 1.0);
    expect_within_steps(want[1], got[1], scale, 1.0);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    const std::string ir = print_graph(exe->graph());
    const bool own = std::string_view(mode) == "1";
    // Stride 2 on an even image: space-to-depth (16 channels of 2x2 blocks, a 4x4 stride-1
    // filter), quantized straight to s8 for the own kernel (no conversion step), to f16 integers
    // for cuDNN.
    EXPECT_EQ(program->count_steps("QuantizeLinear f16 s2d"), own ? 0 : 1) << ir;
    EXPECT_EQ(program->count_steps("QuantizeLinear s2d int8"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv f16 int8"), own ? 1 : 2) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv stem int8 gemm"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->count_steps("MaxPool int8"), 2) << ir;
    EXPECT_EQ(program->count_steps("DequantizeLinear"), 2) << ir;
  }
}

TEST(CudaInt8, FirstConvolutionOnF16TensorCoresMatchesRefWithinOneStep) {
  SKIP_WITHOUT_GPU();
  // A one-channel image (the digit classifier's) of odd size -> Q (u8, zero point 100) -> conv
  // 3x3/1 1 -> 32 with outputs on both sides of the zero point 128 -> a u8 graph output: the f16
  // input (8 channels) and filter hold the centered integers, so the f32 sums are the s8 kernels'
  // exactly.
  const Tensor x = random_tensor(Shape{3, 1, 17, 19}, 81);
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* image = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.008f)),
                                                     b.constant(Tensor::scalar<uint8_t>(100))});
    b.output(qconv(b, image, 0.008f, 100, 32, 1, 3, 1, 0.05f, 128, 82));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph({x}, build), "cuda");
  ASSERT_NE(exe, nullptr);
  expect_within_steps(run(*ref, {x})[0], run(*exe, {x})[0], 1.0, 1.0);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("QuantizeLinear f16"), 1) << ir;
  EXPECT_EQ(program->count_steps("QLinearConv f16 int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("Uncenter int8"), 1) << ir;
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, DequantizeAndGlobalAveragePoolRunAsOneMeanOfTheBytes) {
  SKIP_WITHOUT_GPU();
  // u8 [3, 64, 7, 7] with zero point 37 -> DequantizeLinear -> GlobalAveragePool -> f32: the mean
  // of the centered bytes, scaled once (ResNet's head). Values up to zero point + 127, which the
  // centered s8 data holds exactly (above, they saturate: "On the GPU" in docs/quantization.md).
  const Tensor x = random_ints<uint8_t>(Shape{3, 64, 7, 7}, 0, 37 + 127, 91);
  auto build = [](GraphBuilder& b, Value* in) {
    Value* dq = b.add(Op(ops::DequantizeLinear{}), {in, b.constant(Tensor::scalar(0.043f)),
                                                    b.constant(Tensor::scalar<uint8_t>(37))});
    return b.add(Op(ops::GlobalAveragePool{}), {dq});
  };
  auto [ref_exe, want] = run_one("ref", x, build);
  auto [exe, got] = run_one("cuda", x, build);
  ASSERT_NE(exe, nullptr);
  expect_close({want}, {got}, 1e-5f);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("DequantizeLinear+GlobalAveragePool int8"), 1);
  EXPECT_EQ(program->count_steps("Center int8"), 1);
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, QdqResidualBlockRunsOnInt8KernelsAndMatchesRef) {
  SKIP_WITHOUT_GPU();
  // ResNet's stem and a bottleneck as PyTorch's FX quantization exports them (QDQ around every
  // op): f32 image -> Q -> conv 7x7/2 (3 channels, f16) -> MaxPool between DQ/Q ->
  // 1x1 -> 3x3 -> 1x1 whose DQ meets the identity's in Add -> Relu -> Q -> DQ -> f32.
  const Tensor x = random_tensor(Shape{2, 3, 32, 32}, 51);
  // Scales from the range of each layer's values (random weights; checked with a float model of
  // the same distributions); u8 activations with zero point 128, which centered s8 holds exactly.
  const float out_scale = 12.0f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    auto q = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::QuantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    auto dq = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::DequantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    Value* image = q(in[0], 0.0157f, 128);
    Value* stem = qconv(b, image, 0.0157f, 128, 64, 3, 7, 2, 0.2f, 128, 52);
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* pooled = q(b.add(Op(mp), {dq(stem, 0.2f, 128)}), 0.2f, 128);
    Value* a = qconv(b, pooled, 0.2f, 128, 32, 64, 1, 1, 1.2f, 128, 55);
    Value* c = qconv(b, a, 1.2f, 128, 32, 32, 3, 1, 6.0f, 128, 58);
    Value* e = qconv(b, c, 6.0f, 128, 64, 32, 1, 1, 12.0f, 128, 61);
    Value* sum = b.add(Op(ops::Add{}), {dq(e, 12.0f, 128), dq(pooled, 0.2f, 128)});
    b.output(dq(q(b.add(Op(ops::Relu{}), {sum}), out_scale, 128), out_scale, 128));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph({x}, build), "cuda");
  ASSERT_NE(exe, nullptr);
  // Fused into the last convolution, the residual add rounds once where ref rounds twice (the
  // conv's output first): results a step apart are common, two at most.
  expect_within_steps(run(*ref, {x})[0], run(*exe, {x})[0], out_scale, 2.0, 0.5);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  // The stem's input quantized to s8 for the own kernel, to f16 integers for cuDNN.
  const int own_stem = program->count_steps("QLinearConv stem int8 gemm");
  EXPECT_EQ(program->count_steps("QuantizeLinear s2d int8"), own_stem) << ir;
  EXPECT_EQ(program->count_steps("QuantizeLinear f16 s2d"), 1 - own_stem) << ir;
  // The Add runs in the last convolution where a cuDNN engine takes the fused graph, else as
  // its own int8 step; each 1x1 on cuDNN or the own kernel ("... gemm").
  const int fused = steps_starting(*program, "QLinearConv+Add+Relu int8");
  EXPECT_EQ(fused + program->count_steps("Add+Relu int8"), 1) << ir;
  // The stem on cuDNN's f16 graph or the own s8 kernel, whichever tuning measured faster.
  EXPECT_EQ(program->count_steps("QLinearConv f16 int8") +
                program->count_steps("QLinearConv stem int8 gemm"),
            1)
      << ir;
  EXPECT_EQ(steps_starting(*program, "QLinearConv int8"), 3 - fused) << ir;
  EXPECT_EQ(program->count_steps("MaxPool int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("DequantizeLinear"), 1) << ir;
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

// kiln's own flow for cuda: a float Conv -> Relu -> Conv -> Relu -> depthwise Conv -> Clip(0, 6)
// -> GlobalAveragePool quantized by quantize_int8 (symmetric int8 activations, cuda's default)
// runs every convolution with its ReLU as one int8 kernel (qdq_fusion leaves Relu on the int8
// values; the convolution clamps at zero; the depthwise one on the own kernel), nothing in f32
// but the head, and matches the same quantized graph on ref.
// `build`'s graph on `x`, quantized by kiln's own calibration on ref as for cuda (symmetric
// activations; every reader of a quantized value dequantizing when `every_reader`) over four
// random batches shaped like x (seeds from `seed`), compiled for ref and for cuda and run on x:
// the cuda executable and the largest difference over the largest |ref value|.
struct OwnInt8Run {
  std::shared_ptr<Executable> cuda;
  float relative_error = INFINITY;
};

OwnInt8Run run_own_int8(const Tensor& x, const BuildFn& build, uint32_t seed, bool every_reader) {
  auto quantized = [&] {
    std::shared_ptr<Graph> g = make_graph({x}, build);
    std::vector<CalibrationBatch> calibration;
    for (uint32_t i = 0; i < 4; ++i) {
      calibration.push_back({{"in0", random_tensor(x.shape(), seed + i)}});
    }
    Int8Options options;
    options.symmetric_activations = true;
    options.dequantize_every_reader = every_reader;
    auto ref = make_target("ref");
    EXPECT_TRUE(ref.ok());
    Result<Int8Report> report = quantize_int8(*g, **ref, calibration, options);
    EXPECT_TRUE(report.ok()) << report.status().to_string();
    return g;
  };
  OwnInt8Run r;
  std::shared_ptr<Executable> ref = compile_for(quantized(), "ref");
  r.cuda = compile_for(quantized(), "cuda");
  if (ref == nullptr || r.cuda == nullptr) return r;
  const Tensor want = run(*ref, {x})[0];
  const Tensor got = run(*r.cuda, {x})[0];
  EXPECT_EQ(want.shape(), got.shape());
  if (want.shape() != got.shape()) return r;
  float range = 0, worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    range = std::max(range, std::abs(want.data<float>()[i]));
    worst = std::max(worst, std::abs(want.data<float>()[i] - got.data<float>()[i]));
  }
  EXPECT_GT(range, 0.0f);
  r.relative_error = worst / range;
  return r;
}

TEST(CudaInt8, OwnSymmetricCalibrationRunsConvReluOnInt8Kernels) {
  SKIP_WITHOUT_GPU();
  auto build = [](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* v = in[0];
    int64_t c = 16;
    uint32_t seed = 81;
    for (int64_t k : {32, 32}) {
      ops::Conv conv;
      conv.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* w = b.constant(scaled_random(Shape{k, c, 3, 3}, seed++, 0.2f));
      Value* bias = b.constant(scaled_random(Shape{k}, seed++, 0.1f));
      v = b.add(Op(ops::Relu{}), {b.add(Op(conv), {v, w, bias})});
      c = k;
    }
    // MobileNetV2's depthwise 3x3/2 and ReLU6 (Clip(0, 6)).
    ops::Conv dw;
    dw.pads = std::vector<int64_t>{1, 1, 1, 1};
    dw.strides = std::vector<int64_t>{2, 2};
    dw.group = c;
    Value* w = b.constant(scaled_random(Shape{c, 1, 3, 3}, seed++, 0.5f));
    Value* bias = b.constant(scaled_random(Shape{c}, seed++, 0.1f));
    v = b.add(Op(ops::Clip{}), {b.add(Op(dw), {v, w, bias}), b.constant(Tensor::scalar(0.0f)),
                                b.constant(Tensor::scalar(6.0f))});
    b.output(b.add(Op(ops::GlobalAveragePool{}), {v}));
  };
  const Tensor x = random_tensor(Shape{4, 16, 12, 12}, 80);
  const OwnInt8Run r = run_own_int8(x, build, 90, false);
  ASSERT_NE(r.cuda, nullptr);
  const Executable* exe = r.cuda.get();
  EXPECT_LE(r.relative_error, 0.02f);  // a step or two of the last convolution's scale, averaged
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  int conv_relu = 0;  // "QLinearConv+Relu int8", its "... gemm", or "QLinearConv f16+Relu int8"
  for (const auto& step : program->steps()) {
    conv_relu += step->kind.starts_with("QLinearConv") && step->kind.find("+Relu") != std::string::npos;
  }
  EXPECT_EQ(conv_relu, 3) << ir;
  EXPECT_EQ(program->count_steps("QLinearConv+Relu depthwise int8"), 1) << ir;
  EXPECT_EQ(steps_starting(*program, "Conv"), 0) << ir;
  EXPECT_EQ(program->count_steps("Relu"), 0) << ir;
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size())) << ir;
}

// EfficientNet's pieces quantized by kiln's own symmetric calibration for cuda (every reader of a
// quantized value reading its DequantizeLinear): the stem, the expansion and the depthwise
// convolutions with their SiLU in the int8 kernels' epilogue, squeeze-and-excitation's scaling
// on the int8 values, the pool of its input on the bytes; the excitation's own small convolutions
// (8 channels) stay float. Against ref running the same QDQ graph.
TEST(CudaInt8, OwnCalibrationRunsEfficientNetBlocksOnInt8Kernels) {
  SKIP_WITHOUT_GPU();
  auto build = [](GraphBuilder& b, const std::vector<Value*>& in) {
    uint32_t seed = 120;
    auto conv = [&](Value* v, int64_t k, int64_t r, int64_t stride, int64_t group, bool silu) {
      const int64_t c = v->tensor_type().shape()[1];
      ops::Conv op;
      op.pads = std::vector<int64_t>(4, r / 2);
      op.strides = std::vector<int64_t>{stride, stride};
      op.group = group;
      Value* w = b.constant(scaled_random(Shape{k, c / group, r, r}, seed++, 0.3f));
      Value* bias = b.constant(scaled_random(Shape{k}, seed++, 0.1f));
      Value* y = b.add(Op(op), {v, w, bias});
      return silu ? b.add(Op(ops::Mul{}), {y, b.add(Op(ops::Sigmoid{}), {y})}) : y;
    };
    Value* stem = conv(in[0], 32, 3, 2, 1, true);   // 3 -> 32, 3x3/2: space-to-depth
    Value* expand = conv(stem, 64, 1, 1, 1, true);  // 1x1
    Value* dw = conv(expand, 64, 3, 1, 64, true);   // depthwise 3x3
    Value* squeezed = conv(b.add(Op(ops::GlobalAveragePool{}), {dw}), 8, 1, 1, 1, true);
    Value* gate = b.add(Op(ops::Sigmoid{}), {conv(squeezed, 64, 1, 1, 1, false)});
    Value* project = conv(b.add(Op(ops::Mul{}), {dw, gate}), 32, 1, 1, 1, false);
    b.output(b.add(Op(ops::GlobalAveragePool{}), {b.add(Op(ops::Add{}), {stem, project})}));
  };
  const Tensor x = random_tensor(Shape{4, 3, 32, 32}, 110);
  const OwnInt8Run r = run_own_int8(x, build, 111, true);
  ASSERT_NE(r.cuda, nullptr);
  const Executable* exe = r.cuda.get();
  EXPECT_LE(r.relative_error, 0.03f);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("QLinearConv+SiLU stem int8 gemm"), 1) << ir;
  EXPECT_EQ(program->count_steps("QLinearConv+SiLU int8 gemm"), 1) << ir;
  EXPECT_EQ(program->count_steps("QLinearConv+SiLU depthwise int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("Sigmoid+ChannelScale int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("DequantizeLinear+GlobalAveragePool int8"), 2) << ir;
  EXPECT_EQ(steps_starting(*program, "Conv"), 2) << ir;          // the excitation's, 8 channels
  EXPECT_EQ(program->count_steps("DequantizeLinear"), 2) << ir;  // their inputs
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size())) << ir;
}

// ---- the own int8 1x1 kernel (int8_gemm.h) ----

// Device copies of host bytes, freed on scope exit.
struct DeviceBytes {
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() {
    for (void* p : blocks) cudaFree(p);
  }
  template <class T>
  void* copy(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(host.size() * sizeof(T), 1)), cudaSuccess);
    blocks.push_back(p);
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
  }
  std::vector<void*> blocks;
};

template <class T>
std::vector<T> random_values(size_t n, T lo, T hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(lo, hi);
    for (T& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<int> dist(lo, hi);
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

// The kernel's result on the host: the s32 sums, then its epilogue in f32 steps rounded to
// nearest (volatile: no contraction into fused multiply-adds).
std::vector<int8_t> int8_gemm_on_host(const cuda::Int8Gemm& p, const std::vector<int8_t>& x,
                                      const std::vector<int8_t>& w, const std::vector<float>& scale,
                                      const std::vector<float>& bias,
                                      const std::vector<int8_t>& z) {
  std::vector<int8_t> y(static_cast<size_t>(p.n * p.oh * p.ow * p.k));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t i = 0; i < p.oh; ++i) {
      for (int64_t j = 0; j < p.ow; ++j) {
        const size_t at = static_cast<size_t>(((n * p.oh + i) * p.ow + j) * p.k);
        for (int64_t k = 0; k < p.k; ++k) {
          int32_t acc = 0;
          for (int64_t ty = 0; ty < p.r; ++ty) {
            for (int64_t tx = 0; tx < p.s; ++tx) {
              const int64_t iy = i * p.stride - p.ph + ty;
              const int64_t ix = j * p.stride - p.pw + tx;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              const int8_t* in = &x[static_cast<size_t>(((n * p.h + iy) * p.w + ix) * p.c)];
              const int8_t* f = &w[static_cast<size_t>(((k * p.r + ty) * p.s + tx) * p.c)];
              for (int64_t c = 0; c < p.c; ++c) acc += in[c] * f[c];
            }
          }
          volatile float v = static_cast<float>(acc) * scale[static_cast<size_t>(k)];
          v = v + bias[static_cast<size_t>(k)];
          if (p.residual) {
            v = v + static_cast<float>(z[at + static_cast<size_t>(k)]);
            v = v * p.rescale;
          } else if (p.silu > 0.0f) {
            v = v / (1.0f + std::exp(-v * p.silu));
          }
          const float clamped = std::min(std::max(static_cast<float>(v), static_cast<float>(p.lo)),
                                         static_cast<float>(p.hi));
          y[at + static_cast<size_t>(k)] = static_cast<int8_t>(std::nearbyint(clamped));
        }
      }
    }
  }
  return y;
}

TEST(CudaInt8, OwnGemmMatchesTheHostForEveryTileConfiguration) {
  SKIP_WITHOUT_GPU();
  // 1x1 and 3x3 (pads 1) on 80 input channels (a partial 64-byte reduction step) and on 24 (a
  // multiple of 8 only: the loads in 8-byte halves, a tap boundary inside a 16-byte chunk), 4x4
  // (pads 2) on 16 (the space-to-depth stem's: several taps in one step); stride 1 and 2 (odd
  // input size: the last row and column unread by a strided 1x1), with and without a residual, a
  // negative lower clamp and a ReLU's, or a fused SiLU; 48 output channels and pixel counts that
  // fill no tile.
  for (const int64_t window : {1, 3, 4, -1, -3}) {  // negative: 24 channels, with a SiLU
    for (const int stride : {1, 2}) {
      for (const bool residual : {false, true}) {
        const bool narrow = window < 0;
        if (narrow && residual) continue;
        SCOPED_TRACE(fmt::format("{}x{} stride {} residual {}{}", std::abs(window),
                                 std::abs(window), stride, residual, narrow ? " 24 channels" : ""));
        cuda::Int8Gemm p;
        p.n = 3;
        p.h = 13;
        p.w = 11;
        p.c = window == 4 ? 16 : narrow ? 24 : 80;
        p.silu = narrow ? 0.05f : 0.0f;
        p.k = 48;
        p.r = p.s = std::abs(window);
        p.ph = p.pw = p.r / 2;  // 4x4: pads 2 before, 1 after
        p.stride = stride;
        p.oh = (p.h + 2 * p.ph - (window == 4 ? 1 : 0) - p.r) / stride + 1;
        p.ow = (p.w + 2 * p.pw - (window == 4 ? 1 : 0) - p.s) / stride + 1;
        p.residual = residual;
        p.rescale = 0.75f;
        p.lo = residual ? 0 : -100;
        p.hi = 120;
        ASSERT_TRUE(cuda::int8_gemm_supported(p));
        const auto x = random_values<int8_t>(static_cast<size_t>(p.n * p.h * p.w * p.c), -128, 127,
                                             11 + stride);
        const auto w =
            random_values<int8_t>(static_cast<size_t>(p.k * p.r * p.s * p.c), -127, 127, 12);
        // Sums of 80 products spread about 5e4 (more for longer windows, as the square root):
        // scales that spread them over s8.
        const float spread = std::sqrt(80.0f / static_cast<float>(p.r * p.s * p.c));
        const auto scale =
            random_values<float>(static_cast<size_t>(p.k), 1e-4f * spread, 8e-4f * spread, 13);
        const auto bias = random_values<float>(static_cast<size_t>(p.k), -20.0f, 20.0f, 14);
        const auto z =
            random_values<int8_t>(static_cast<size_t>(p.n * p.oh * p.ow * p.k), -128, 127, 15);
        const std::vector<int8_t> want = int8_gemm_on_host(p, x, w, scale, bias, z);
        int lo = 127, hi = -128;
        for (int8_t v : want) lo = std::min<int>(lo, v), hi = std::max<int>(hi, v);
        // A SiLU's output dips to about -5.6 steps at most.
        const int below = residual ? 1 : narrow ? -2 : -50;
        EXPECT_LT(lo, below) << "a degenerate case";
        EXPECT_GT(hi, 60) << "a degenerate case";
        DeviceBytes d;
        void* xd = d.copy(x);
        void* wd = d.copy(w);
        void* sd = d.copy(scale);
        void* bd = d.copy(bias);
        void* zd = d.copy(z);
        void* yd = d.copy(std::vector<int8_t>(want.size(), 0x55));
        for (int config = 0; config < cuda::int8_gemm_configs(); ++config) {
          SCOPED_TRACE(cuda::int8_gemm_config_name(config));
          cudaMemset(yd, 0x55, want.size());
          Status st = cuda::launch_int8_gemm(config, p, xd, wd, static_cast<const float*>(sd),
                                             static_cast<const float*>(bd), zd, yd, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<int8_t> got(want.size());
          cudaMemcpy(got.data(), yd, got.size(), cudaMemcpyDeviceToHost);
          int64_t off = 0;
          int worst = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            off += got[i] != want[i] ? 1 : 0;
            worst = std::max(worst, std::abs(got[i] - want[i]));
          }
          if (narrow) {
            // The device's __expf against std::exp: a value on a rounding boundary may differ.
            EXPECT_LE(worst, 1);
            EXPECT_LE(off * 200, static_cast<int64_t>(got.size())) << off << " differ";
          } else {
            EXPECT_EQ(off, 0) << off << " of " << got.size() << " differ";
          }
        }
      }
    }
  }
}

TEST(CudaInt8, DenseF16QuantizeMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  // launch_quantize8 from f16 where x and y share one dense layout (the 8-a-thread path: the
  // `Round f16 int8` step after an f16-output stem), with halves (ties to even), values beyond the
  // bounds, u8 and s8 outputs; against the host formula clamp(rint(x / scale) + off, lo, hi).
  const int64_t n = 3, c = 16, pixels = 35;  // 1680 elements: 210 groups of 8
  std::vector<uint16_t> bits(static_cast<size_t>(n * c * pixels));
  std::vector<float> values(bits.size());
  std::mt19937 rng(171);
  std::uniform_int_distribution<int> halves(-400, 400);
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = Half(static_cast<float>(halves(rng)) * 0.5f).bits;
    values[i] = static_cast<float>(Half::from_bits(bits[i]));
  }
  cuda::Int8Layout l;
  l.n = n;
  l.c = c;
  l.s = pixels;
  l.stored_c = c;
  l.nhwc = true;
  DeviceBytes d;
  void* xd = d.copy(bits);
  void* yd = d.copy(std::vector<uint8_t>(bits.size(), 0x55));
  struct Case {
    bool u8;
    float scale;
    int32_t off, lo, hi;
  };
  for (const Case k : {Case{false, 1.0f, 0, -128, 127}, Case{true, 0.5f, 100, 0, 255},
                       Case{false, 2.0f, -3, -100, 90}}) {
    SCOPED_TRACE(fmt::format("u8 {} scale {} off {}", k.u8, k.scale, k.off));
    Status st = cuda::launch_quantize8(cuda::Elem::kF16, xd, l, yd, l, k.u8, k.scale, k.off, k.lo,
                                       k.hi, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> got(bits.size());
    cudaMemcpy(got.data(), yd, got.size(), cudaMemcpyDeviceToHost);
    int64_t off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float q =
          std::min(std::max(std::nearbyint(values[i] / k.scale) + k.off, static_cast<float>(k.lo)),
                   static_cast<float>(k.hi));
      const int want = static_cast<int>(q);
      const int have = k.u8 ? got[i] : static_cast<int8_t>(got[i]);
      off += want != have ? 1 : 0;
    }
    EXPECT_EQ(off, 0) << off << " of " << got.size() << " differ";
  }
}

TEST(CudaInt8, OwnGemmRejectsWhatItDoesNotTake) {
  cuda::Int8Gemm p;
  p.n = 2, p.h = 8, p.w = 8, p.c = 64, p.k = 64, p.oh = 8, p.ow = 8;
  EXPECT_TRUE(cuda::int8_gemm_supported(p));
  cuda::Int8Gemm odd = p;
  odd.c = 36;  // channels padded to a multiple of 4 only: cuDNN runs it
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.k = 40;
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.stride = 3;
  odd.oh = odd.ow = 3;
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.r = odd.s = 3;
  odd.ph = 3;  // a leading pad as large as the window
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  // The launch says why.
  odd = p;
  odd.c = 36;
  Status st =
      cuda::launch_int8_gemm(0, odd, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("multiples of 16"), std::string::npos) << st.to_string();
  st = cuda::launch_int8_gemm(cuda::int8_gemm_configs(), p, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr);
  EXPECT_NE(st.to_string().find("no tile configuration"), std::string::npos) << st.to_string();
}

TEST(CudaInt8, PointwiseConvolutionsOnTheOwnKernelMatchCudnnAndRef) {
  SKIP_WITHOUT_GPU();
  // 1x1 64 -> 128 (output zero point 128: a negative lower clamp), a strided 1x1 128 -> 64, and a
  // 1x1 64 -> 64 whose DQ meets the strided one's in Add -> Relu -> Q (the residual fused), then
  // DQ -> f32; with KILN_CUDA_INT8_GEMM=1 (the own kernel) and =0 (cuDNN).
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 14, 14}, 0, 127, 141);
  // Scales from each layer's spread (random weights); u8 activations with zero point 128, which
  // centered s8 holds exactly.
  const float out_scale = 6.0f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    auto dq = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::DequantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    Value* a = qconv(b, in[0], 0.02f, 128, 128, 64, 1, 1, 0.25f, 128, 142);
    Value* s2 = qconv(b, a, 0.25f, 128, 64, 128, 1, 2, 2.0f, 128, 145);
    Value* e = qconv(b, s2, 2.0f, 128, 64, 64, 1, 1, 4.0f, 128, 148);
    Value* sum = b.add(Op(ops::Add{}), {dq(e, 4.0f, 128), dq(s2, 2.0f, 128)});
    Value* q = b.add(Op(ops::QuantizeLinear{}),
                     {b.add(Op(ops::Relu{}), {sum}), b.constant(Tensor::scalar(out_scale)),
                      b.constant(Tensor::scalar<uint8_t>(128))});
    b.output(dq(q, out_scale, 128));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  ASSERT_NE(ref, nullptr);
  const Tensor want = run(*ref, {x})[0];
  std::map<std::string, Tensor> got;
  for (const char* mode : {"1", "0"}) {
    SCOPED_TRACE(fmt::format("KILN_CUDA_INT8_GEMM={}", mode));
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph({x}, build), "KILN_CUDA_INT8_GEMM", mode);
    ASSERT_NE(exe, nullptr);
    got[mode] = run(*exe, {x})[0];
    // As in QdqResidualBlockRunsOnInt8KernelsAndMatchesRef: the fused residual rounds once.
    expect_within_steps(want, got[mode], out_scale, 2.0, 0.5);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    const std::string ir = print_graph(exe->graph());
    const bool own = std::string_view(mode) == "1";
    EXPECT_EQ(program->count_steps("QLinearConv int8 gemm"), own ? 2 : 0) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv+Add+Relu int8 gemm"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
  }
  // The same epilogue as cuDNN's graph: equal but where cuDNN clamps no negative lower bound (the
  // first convolution's; a value below it stays unclipped there) or rounds a tie differently.
  expect_within_steps(got["0"], got["1"], out_scale, 1.0, 0.05);
}

}  // namespace
}  // namespace kiln::compiler
