// SPDX-License-Identifier: Apache-2.0
// The cpu target's integer kernels against ref on ResNet-sized shapes: QLinearConv, ConvInteger
// after DynamicQuantizeLinear, QLinearMatMul and a QDQ conv region agree within one quantization
// step (int32 outputs exactly), and run as int8 oneDNN steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/quantize/quantize.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/cpu_target.h"

namespace kiln::compiler {
namespace {

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

Tensor random_f32(Shape shape, float lo, float hi, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

Tensor per_channel_scales(int64_t n, uint32_t seed) {
  return random_f32(Shape{n}, 0.002f, 0.01f, seed);
}

struct Outcome {
  std::shared_ptr<Executable> exe;
  Tensor out;
};

Outcome run_on(const char* target_name, const Tensor& input,
               const std::function<Value*(GraphBuilder&, Value*)>& build) {
  auto graph = std::make_shared<Graph>("quantized");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(input.dtype(), input.shape()));
  b.output(build(b, x));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  auto target = make_target(target_name);
  auto exe = compile(graph, **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  auto out = (*exe)->run({Argument(input)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return {*exe, (*out)[0].tensor()};
}

// Compares the cpu and ref outputs element by element: at most `tolerance` apart (in units of
// the output type), and at most `max_off_fraction` of the elements differing at all.
void expect_close(const Tensor& ref, const Tensor& cpu, double tolerance, double max_off_fraction) {
  ASSERT_EQ(ref.dtype(), cpu.dtype());
  ASSERT_EQ(ref.shape(), cpu.shape());
  int64_t off = 0;
  double worst = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = 0, g = 0;
    switch (ref.dtype()) {
      case DType::kU8: a = ref.data<uint8_t>()[i], g = cpu.data<uint8_t>()[i]; break;
      case DType::kI8: a = ref.data<int8_t>()[i], g = cpu.data<int8_t>()[i]; break;
      case DType::kI32: a = ref.data<int32_t>()[i], g = cpu.data<int32_t>()[i]; break;
      case DType::kF32: a = ref.data<float>()[i], g = cpu.data<float>()[i]; break;
      default: FAIL() << "unexpected dtype";
    }
    off += a != g ? 1 : 0;
    worst = std::max(worst, std::abs(a - g));
  }
  EXPECT_LE(worst, tolerance);
  EXPECT_LE(static_cast<double>(off), max_off_fraction * static_cast<double>(ref.numel()))
      << off << " of " << ref.numel() << " differ";
}

void expect_steps(const Executable& exe, std::string_view kind, int count) {
  const cpu::Program* program = cpu_program(exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps(kind), count) << print_graph(exe.graph());
}

TEST(CpuQuantized, QLinearConvMatchesRefWithinOneStep) {
  // A ResNet layer: 64 -> 64 channels, 3x3, pad 1, per-channel weights, u8 in and out, bias.
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 28, 28}, 0, 255, 1);
  auto build = [](GraphBuilder& b, Value* in) {
    ops::QLinearConv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    return b.add(
        Op(op),
        {in, b.constant(Tensor::scalar(0.02f)), b.constant(Tensor::scalar<uint8_t>(3)),
         b.constant(random_ints<int8_t>(Shape{64, 64, 3, 3}, -127, 127, 2)),
         b.constant(per_channel_scales(64, 3)), b.constant(Tensor(DType::kI8, Shape{64})),  // zeros
         b.constant(Tensor::scalar(0.5f)), b.constant(Tensor::scalar<uint8_t>(10)),
         b.constant(random_ints<int32_t>(Shape{64}, -5000, 5000, 4))});
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 1, 0.01);
  expect_steps(*cpu.exe, "QLinearConv int8", 1);
}

TEST(CpuQuantized, DepthwiseQLinearConvWithItsClipMatchesRef) {
  // MobileNetV2's depthwise 3x3 with the u8 Clip qdq_fusion makes of ReLU6 (bounds Q(0) = the
  // zero point and Q(6)), which the convolution applies as a post-op.
  const Tensor x = random_ints<uint8_t>(Shape{2, 96, 28, 28}, 0, 255, 11);
  auto build = [](GraphBuilder& b, Value* in) {
    ops::QLinearConv op;
    op.group = 96;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(
        Op(op), {in, b.constant(Tensor::scalar(0.02f)), b.constant(Tensor::scalar<uint8_t>(60)),
                 b.constant(random_ints<int8_t>(Shape{96, 1, 3, 3}, -127, 127, 12)),
                 b.constant(per_channel_scales(96, 13)), b.constant(Tensor(DType::kI8, Shape{96})),
                 b.constant(Tensor::scalar(0.03f)), b.constant(Tensor::scalar<uint8_t>(70)),
                 b.constant(random_ints<int32_t>(Shape{96}, -3000, 3000, 14))});
    return b.add(Op(ops::Clip{}), {y, b.constant(Tensor::scalar<uint8_t>(70)),
                                   b.constant(Tensor::scalar<uint8_t>(200))});
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 1, 0.01);
  expect_steps(*cpu.exe, "QLinearConv int8", 1);
  expect_steps(*cpu.exe, "Clip", 0);
  // Both bounds are reached, so the test sees the clipping.
  int low = 0, high = 0;
  for (uint8_t v : cpu.out.span<uint8_t>()) low += v == 70, high += v == 200;
  EXPECT_GT(low, 1000);
  EXPECT_GT(high, 1000);
}

TEST(CpuQuantized, QdqLinearWithBiasRunsAsAnInt8Conv) {
  // torch's export of a quantized Linear on [B, S, K]: Q(MatMul(DQ(x), Transpose(DQ(w))) +
  // DQ(int32 bias)); qdq_fusion makes it a 1x1 QLinearConv between two Reshapes.
  const Tensor x = random_ints<uint8_t>(Shape{2, 16, 64}, 0, 255, 21);
  auto build = [](GraphBuilder& b, Value* in) {
    const float xs = 0.03f;
    Tensor ws = per_channel_scales(48, 22);
    Tensor bs(DType::kF32, Shape{48});
    for (int i = 0; i < 48; ++i) bs.data<float>()[i] = xs * ws.data<float>()[i];
    ops::DequantizeLinear axis0;
    axis0.axis = 0;
    Value* xd = b.add(Op(ops::DequantizeLinear{}), {in, b.constant(Tensor::scalar(xs)),
                                                    b.constant(Tensor::scalar<uint8_t>(128))});
    Value* wd = b.add(Op(axis0), {b.constant(random_ints<int8_t>(Shape{48, 64}, -127, 127, 23)),
                                  b.constant(ws), b.constant(Tensor(DType::kI8, Shape{48}))});
    ops::Transpose t;
    t.perm = std::vector<int64_t>{1, 0};
    Value* mm = b.add(Op(ops::MatMul{}), {xd, b.add(Op(t), {wd})});
    Value* bd = b.add(Op(axis0), {b.constant(random_ints<int32_t>(Shape{48}, -9000, 9000, 24)),
                                  b.constant(bs), b.constant(Tensor(DType::kI32, Shape{48}))});
    Value* y = b.add(Op(ops::QuantizeLinear{}),
                     {b.add(Op(ops::Add{}), {mm, bd}), b.constant(Tensor::scalar(0.3f)),
                      b.constant(Tensor::scalar<uint8_t>(128))});
    return y;
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 1, 0.02);
  expect_steps(*cpu.exe, "QLinearConv int8", 1);
  expect_steps(*cpu.exe, "MatMul", 0);
}

TEST(CpuQuantized, ResidualAddOfTwoQuantizedTensorsIsOneInt8Step) {
  // A ResNet block's end: Q(Relu(DQ(conv) + DQ(identity))), each with its own scale and zero
  // point, as one int8 binary add in the conv's layout.
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 14, 14}, 0, 255, 31);
  auto build = [](GraphBuilder& b, Value* in) {
    ops::QLinearConv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* xs = b.constant(Tensor::scalar(0.02f));
    Value* xz = b.constant(Tensor::scalar<uint8_t>(100));
    Value* cs = b.constant(Tensor::scalar(0.4f));
    Value* cz = b.constant(Tensor::scalar<uint8_t>(128));
    Value* conv = b.add(
        Op(op), {in, xs, xz, b.constant(random_ints<int8_t>(Shape{64, 64, 3, 3}, -127, 127, 32)),
                 b.constant(per_channel_scales(64, 33)), b.constant(Tensor(DType::kI8, Shape{64})),
                 cs, cz});
    Value* sum = b.add(Op(ops::Add{}), {b.add(Op(ops::DequantizeLinear{}), {conv, cs, cz}),
                                        b.add(Op(ops::DequantizeLinear{}), {in, xs, xz})});
    return b.add(Op(ops::QuantizeLinear{}),
                 {b.add(Op(ops::Relu{}), {sum}), b.constant(Tensor::scalar(0.3f)),
                  b.constant(Tensor::scalar<uint8_t>(0))});
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 1, 0.01);
  expect_steps(*cpu.exe, "Add int8", 1);
  expect_steps(*cpu.exe, "DequantizeLinear int8", 0);
  int zeros = 0;
  for (uint8_t v : cpu.out.span<uint8_t>()) zeros += v == 0;
  EXPECT_GT(zeros, 1000);  // the Relu bites
  EXPECT_LT(zeros, cpu.out.numel() - 1000);
}

TEST(CpuQuantized, ConvIntegerAfterDynamicQuantizeLinearIsExact) {
  // A dynamically quantized conv: DynamicQuantizeLinear computes x's scale and zero point at run
  // time; ConvInteger takes the zero point as a runtime input and accumulates in int32.
  const Tensor x = random_f32(Shape{1, 32, 20, 20}, -1.0f, 3.0f, 5);
  auto build = [](GraphBuilder& b, Value* in) {
    std::vector<Value*> q = b.add(Op(ops::DynamicQuantizeLinear{}), {in}, 3);
    ops::ConvInteger op;
    op.strides = std::vector<int64_t>{2, 2};
    return b.add(Op(op),
                 {q[0], b.constant(random_ints<int8_t>(Shape{48, 32, 3, 3}, -127, 127, 6)), q[2]});
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 0, 0);
  expect_steps(*cpu.exe, "ConvInteger int8", 1);
}

TEST(CpuQuantized, QLinearMatMulMatchesRefWithinOneStep) {
  const Tensor a = random_ints<uint8_t>(Shape{4, 128, 256}, 0, 255, 7);
  auto build = [](GraphBuilder& b, Value* in) {
    return b.add(Op(ops::QLinearMatMul{}),
                 {in, b.constant(Tensor::scalar(0.03f)), b.constant(Tensor::scalar<uint8_t>(128)),
                  b.constant(random_ints<int8_t>(Shape{256, 96}, -127, 127, 8)),
                  b.constant(per_channel_scales(96, 9)), b.constant(Tensor(DType::kI8, Shape{96})),
                  b.constant(Tensor::scalar(0.4f)), b.constant(Tensor::scalar<int8_t>(-3))});
  };
  Outcome ref = run_on("ref", a, build);
  Outcome cpu = run_on("cpu", a, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 1, 0.01);
  expect_steps(*cpu.exe, "QLinearMatMul int8", 1);
}

TEST(CpuQuantized, MatMulIntegerIsExact) {
  const Tensor a = random_ints<uint8_t>(Shape{64, 200}, 0, 255, 10);
  auto build = [](GraphBuilder& b, Value* in) {
    return b.add(Op(ops::MatMulInteger{}),
                 {in, b.constant(random_ints<int8_t>(Shape{200, 40}, -127, 127, 11)),
                  b.constant(Tensor::scalar<uint8_t>(7))});
  };
  Outcome ref = run_on("ref", a, build);
  Outcome cpu = run_on("cpu", a, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_close(ref.out, cpu.out, 0, 0);
  expect_steps(*cpu.exe, "MatMulInteger int8", 1);
}

// Q -> DQ -> Conv(DQ(int8 weights, axis 0), bias) -> Relu -> Q -> DQ, as FX quantization exports
// it: the cpu target rewrites it to QLinearConv on int8 kernels; ref emulates it in f32.
TEST(CpuQuantized, QdqConvRegionRunsOnIntegerKernels) {
  const Tensor x = random_f32(Shape{1, 32, 14, 14}, -2.0f, 2.0f, 12);
  auto build = [](GraphBuilder& b, Value* in) {
    Value* xs = b.constant(Tensor::scalar(4.0f / 255));
    Value* xz = b.constant(Tensor::scalar<uint8_t>(128));
    Value* xq = b.add(Op(ops::QuantizeLinear{}), {in, xs, xz});
    Value* xd = b.add(Op(ops::DequantizeLinear{}), {xq, xs, xz});
    ops::DequantizeLinear per_channel;
    per_channel.axis = 0;
    Value* wd =
        b.add(Op(per_channel),
              {b.constant(random_ints<int8_t>(Shape{32, 32, 3, 3}, -127, 127, 13)),
               b.constant(per_channel_scales(32, 14)), b.constant(Tensor(DType::kI8, Shape{32}))});
    ops::Conv conv;
    conv.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(conv), {xd, wd, b.constant(random_f32(Shape{32}, -0.1f, 0.1f, 15))});
    Value* r = b.add(Op(ops::Relu{}), {y});
    Value* ys = b.constant(Tensor::scalar(0.02f));
    Value* yz = b.constant(Tensor::scalar<uint8_t>(0));
    Value* yq = b.add(Op(ops::QuantizeLinear{}), {r, ys, yz});
    return b.add(Op(ops::DequantizeLinear{}), {yq, ys, yz});
  };
  Outcome ref = run_on("ref", x, build);
  Outcome cpu = run_on("cpu", x, build);
  ASSERT_NE(cpu.exe, nullptr);
  expect_steps(*cpu.exe, "QLinearConv int8", 1);
  EXPECT_EQ(print_graph(cpu.exe->graph()).find("= Conv"), std::string::npos);
  // One output step is 0.02: f32 emulation and integer kernels round differently at most once.
  expect_close(ref.out, cpu.out, 0.02 + 1e-6, 0.02);
}

// kiln's own int8 flow (quantize_int8 on cpu) over a residual block: x -> Conv -> Relu -> MaxPool
// -> Conv -> Relu -> Conv, + the pooled input, -> Relu -> GlobalAveragePool. Every convolution,
// the MaxPool and the residual Add run on 8-bit data; the output stays close to fp32's.
std::shared_ptr<Graph> residual_block() {
  auto graph = std::make_shared<Graph>("residual");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 8, 16, 16}));
  uint32_t seed = 40;
  auto conv = [&](Value* in, int64_t k) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
    const float bound = 1.0f / std::sqrt(static_cast<float>(16 * k * k));
    Value* w = b.constant(
        random_f32(Shape{16, in->tensor_type().shape()[1], k, k}, -bound, bound, ++seed));
    return b.add(Op(op), {in, w, b.constant(random_f32(Shape{16}, -0.1f, 0.1f, ++seed))});
  };
  Value* stem = b.add(Op(ops::Relu{}), {conv(x, 3)});
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  Value* pooled = b.add(Op(pool), {stem});
  Value* inner = b.add(Op(ops::Relu{}), {conv(pooled, 3)});
  Value* sum = b.add(Op(ops::Add{}), {conv(inner, 1), pooled});
  b.output(b.add(Op(ops::GlobalAveragePool{}), {b.add(Op(ops::Relu{}), {sum})}));
  return graph;
}

TEST(CpuQuantized, OwnInt8FlowRunsAResidualBlockOnIntegerKernels) {
  auto target = make_target("cpu");
  ASSERT_TRUE(target.ok());
  std::vector<CalibrationBatch> calibration;
  for (uint32_t i = 0; i < 4; ++i) {
    calibration.push_back({{"x", random_f32(Shape{1, 8, 16, 16}, -1.0f, 1.0f, 70 + i)}});
  }
  std::shared_ptr<Graph> quantized = residual_block();
  Result<Int8Report> report = quantize_int8(*quantized, **target, calibration);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  auto exe = compile(quantized, **target);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  expect_steps(**exe, "QLinearConv int8", 3);
  expect_steps(**exe, "Add int8", 1);
  expect_steps(**exe, "MaxPool", 1);
  const std::string ir = print_graph((*exe)->graph());
  EXPECT_NE(ir.find("u8[1,16,8,8] = MaxPool"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("= Conv["), std::string::npos) << ir;

  auto plain = compile(residual_block(), **target);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  const Tensor x = random_f32(Shape{1, 8, 16, 16}, -1.0f, 1.0f, 99);
  auto want = (*plain)->run({Argument(x)});
  auto got = (*exe)->run({Argument(x)});
  ASSERT_TRUE(want.ok() && got.ok());
  auto a = (*want)[0].tensor().span<float>();
  auto g = (*got)[0].tensor().span<float>();
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max<double>(worst, std::abs(a[i] - g[i]));
    largest = std::max<double>(largest, std::abs(a[i]));
  }
  EXPECT_LT(worst, 0.05 * largest) << worst << " of " << largest;
}

}  // namespace
}  // namespace kiln::compiler
