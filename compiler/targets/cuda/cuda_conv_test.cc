// SPDX-License-Identifier: Apache-2.0
// Convolutions on the cuda target against ref (fixed seeds): cuDNN with its fused epilogues, the
// own tensor-core kernel, depthwise ones on the own kernel in either layout, SiLU and
// squeeze-and-excitation inside their producers; every case skips where no GPU is present.
#include <unistd.h>

#include <algorithm>

#include "compiler/targets/cuda/cuda_testing.h"

namespace kiln::compiler {
namespace {

TEST(CudaTarget, ConvolutionsMatchRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    int64_t group = 1;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    bool relu = false;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 9, 7}, Shape{5, 3, 3, 3}, 1, {2, 1}, {1, 1, 1, 1}, {}, true, true},
      {Shape{1, 6, 8, 8}, Shape{6, 2, 3, 3}, 3, {2, 2}, {2, 2, 2, 2}, {2, 2}, true, false},
      {Shape{1, 8, 10, 10}, Shape{8, 1, 3, 3}, 8, {1, 1}, {1, 1, 1, 1}, {}, false, true},
      {Shape{4, 16, 14, 14}, Shape{32, 16, 1, 1}, 1, {}, {}, {}, true, true},
      // Asymmetric pads: not cuDNN's legacy API, so the host runs it; the result still matches.
      {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}, 1, {}, {0, 1, 2, 0}, {}, true, false},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const Tensor w = random_tensor(c.w, seed++);
    const Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    const std::vector<Tensor> inputs = {random_tensor(c.x, seed++)};
    auto steps =
        expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
          ops::Conv op;
          op.group = c.group;
          if (!c.strides.empty()) op.strides = c.strides;
          if (!c.pads.empty()) op.pads = c.pads;
          if (!c.dilations.empty()) op.dilations = c.dilations;
          std::vector<Value*> args = {in[0], b.constant(w, "w")};
          if (c.bias) args.push_back(b.constant(bias, "b"));
          Value* y = b.add(Op(op), args);
          b.output(c.relu ? b.add(Op(ops::Relu{}), {y}) : y);
        });
    const bool symmetric = c.pads.empty() || (c.pads[0] == c.pads[2] && c.pads[1] == c.pads[3]);
    EXPECT_EQ(steps.first, symmetric ? 1 : 0);
  }
}

TEST(CudaTarget, ClipAfterConvAndReluAfterAddRunInsideTheirProducers) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 4, 3, 3}, 20);
  const Tensor bias = random_tensor(Shape{4}, 21);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 8, 8}, 22)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(op), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* c = b.add(Op(ops::Clip{}), {y, b.constant(Tensor::scalar<float>(0.0f), "lo"),
                                       b.constant(Tensor::scalar<float>(0.5f), "hi")});
    b.output(b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {c, in[0]})}));
  };
  auto steps = expect_cuda_matches_ref(inputs, build);
  EXPECT_EQ(steps.first, 2);
  EXPECT_EQ(steps.second, 2);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Conv+Bias+Clip"), 1);
  EXPECT_EQ(program->count_steps("Add+Relu"), 1);
}

TEST(CudaTarget, ResidualAddAndReluRunInTheConvolutionsBiasKernel) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 4, 3, 3}, 23);
  const Tensor bias = random_tensor(Shape{4}, 24);
  const Tensor w2 = random_tensor(Shape{4, 4, 1, 1}, 25);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 8, 8}, 26)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    // A ResNet block end: relu(conv(x) + bias + x); then a residual whose other operand comes
    // later (a second branch's convolution, lowered after it): the Add runs on its own.
    Value* y = b.add(Op(op), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {in[0], y})});
    Value* a = b.add(Op(op), {r, b.constant(w, "w3")});
    Value* c = b.add(Op(ops::Conv{}), {r, b.constant(w2, "w2")});
    b.output(b.add(Op(ops::Add{}), {a, c}));
  };
  auto steps = expect_cuda_matches_ref(inputs, build);
  EXPECT_EQ(steps.first, steps.second);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Conv+Bias+Add+Relu"), 1);
  EXPECT_EQ(program->count_steps("Conv+Add"), 1);  // the second convolution takes the first's Add
  EXPECT_EQ(program->steps().size(), 3u);
}

// Depthwise convolutions run on the own kernel (not cuDNN), in every layout and float type: the
// vectorized NHWC kernel (channels a multiple of 16 bytes, kw 3 or 5, sw 1 or 2) and the one
// element a thread kernel (NCHW, other channel counts, dilation), with bias and ReLU/ReLU6 fused.
TEST(CudaTarget, DepthwiseConvolutionsMatchRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    int activation = 0;  // 0 none, 1 Relu, 2 Clip [0, 6]
  };
  const std::vector<Case> cases = {
      {Shape{2, 16, 9, 11}, Shape{16, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, true, 2},
      {Shape{3, 24, 12, 10}, Shape{24, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, 1},
      {Shape{2, 32, 13, 13}, Shape{32, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {}, true, 2},
      {Shape{1, 12, 7, 9}, Shape{12, 1, 5, 5}, {}, {2, 2, 2, 2}, {}, false, 0},     // C % 8 != 0
      {Shape{2, 8, 8, 8}, Shape{8, 1, 3, 3}, {}, {0, 1, 2, 0}, {}, true, 0},        // asymmetric
      {Shape{2, 8, 9, 9}, Shape{8, 1, 3, 3}, {}, {2, 2, 2, 2}, {2, 2}, true, 1},    // dilated
      {Shape{1, 16, 6, 7}, Shape{16, 1, 3, 5}, {2, 1}, {1, 2, 1, 2}, {}, true, 2},  // 3x5
      {Shape{2, 5, 6, 6}, Shape{5, 1, 3, 3}, {1, 2}, {1, 1, 1, 1}, {}, true, 2},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const Tensor w = random_tensor(c.w, seed++);
    Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    for (float& v : bias.span<float>()) v *= 2.0f;  // some outputs clamp at 0 and at 6
    Tensor x = random_tensor(c.x, seed++);
    for (float& v : x.span<float>()) v *= 3.0f;
    const std::vector<Tensor> inputs = {x};
    auto build_in = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        ops::Conv op;
        op.group = c.x[1];
        if (!c.strides.empty()) op.strides = c.strides;
        if (!c.pads.empty()) op.pads = c.pads;
        if (!c.dilations.empty()) op.dilations = c.dilations;
        Value* from = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
        std::vector<Value*> args = {from, b.constant(in_dtype(w, dt), "w")};
        if (c.bias) args.push_back(b.constant(in_dtype(bias, dt), "b"));
        Value* y = b.add(Op(op), args);
        if (c.activation == 1) y = b.add(Op(ops::Relu{}), {y});
        if (c.activation == 2) {
          y = b.add(Op(ops::Clip{}), {y, b.constant(in_dtype(Tensor::scalar<float>(0.0f), dt)),
                                      b.constant(in_dtype(Tensor::scalar<float>(6.0f), dt))});
        }
        b.output(dt == DType::kF32 ? y : cast_to(b, y, DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const char* layout : {"nhwc", "nchw"}) {
      ::setenv("KILN_CUDA_LAYOUT", layout, 1);
      for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() + " " + std::string(dtype_name(dt)) +
                     " " + layout);
        std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
        ASSERT_NE(exe, nullptr);
        // f16/bf16: the input, filter and bias rounded once each, the output once (f32 sums).
        const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 2e-5f;
        expect_close(want, run(*exe, inputs), tolerance);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        EXPECT_EQ(steps_starting(*program, "DepthwiseConv"), 1);
        EXPECT_EQ(steps_starting(*program, "Conv"), 0);
        EXPECT_EQ(steps_starting(*program, "Relu") + steps_starting(*program, "Clip"), 0)
            << "the activation runs in the convolution's step";
      }
    }
    ::unsetenv("KILN_CUDA_LAYOUT");
  }
}

// The own tensor-core convolution (conv_mma.h, forced by KILN_CUDA_CONV_MMA=1; tuning otherwise
// takes it only where it measures faster than cuDNN) against ref in f32: stems reading the NCHW
// image as it is (3 channels, 3x3 and 7x7 stride 2; 5 channels, a 3x5 window, strides 1 and 2),
// 1x1 convolutions of NHWC inputs (16 -> 96 with ReLU6, 48 -> 40 with SiLU, 32 -> 16 with a
// residual Add), output pixel counts that leave partial tiles; then with the kernel off (cuDNN) as
// well.
TEST(CudaTarget, OwnConvolutionKernelMatchesRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    int activation = 0;  // 0 none, 1 Relu, 2 Clip [0, 6], 3 SiLU, 4 residual Add
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 23, 21}, Shape{32, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, 2},
      {Shape{1, 3, 30, 30}, Shape{64, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}, true, 1},
      {Shape{2, 5, 13, 12}, Shape{24, 5, 3, 5}, {1, 2}, {1, 2, 1, 2}, {}, false, 0},
      {Shape{2, 16, 9, 7}, Shape{96, 16, 1, 1}, {}, {}, {}, true, 2},
      {Shape{3, 48, 5, 6}, Shape{40, 48, 1, 1}, {}, {}, {}, true, 3},
      {Shape{2, 32, 11, 10}, Shape{16, 32, 1, 1}, {}, {}, {}, true, 4},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    Tensor w = random_tensor(c.w, seed++);
    // Outputs of a few units (some clamped at 0 and at 6) whatever the reduction's length.
    const float gain = 3.0f / std::sqrt(static_cast<float>(c.w[1] * c.w[2] * c.w[3]));
    for (float& v : w.span<float>()) v *= gain;
    const Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    const Tensor x = random_tensor(c.x, seed++);
    std::vector<Tensor> inputs = {x};
    if (c.activation == 4)
      inputs.push_back(random_tensor(Shape{c.x[0], c.w[0], c.x[2], c.x[3]}, seed++));
    auto build_in = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
        ops::Conv op;
        if (!c.strides.empty()) op.strides = c.strides;
        if (!c.pads.empty()) op.pads = c.pads;
        if (!c.dilations.empty()) op.dilations = c.dilations;
        Value* z = c.activation == 4 ? cast(in[1], dt) : nullptr;
        std::vector<Value*> args = {cast(in[0], dt), b.constant(in_dtype(w, dt), "w")};
        if (c.bias) args.push_back(b.constant(in_dtype(bias, dt), "b"));
        Value* y = b.add(Op(op), args);
        if (c.activation == 1) y = b.add(Op(ops::Relu{}), {y});
        if (c.activation == 2) {
          y = b.add(Op(ops::Clip{}), {y, b.constant(in_dtype(Tensor::scalar<float>(0.0f), dt)),
                                      b.constant(in_dtype(Tensor::scalar<float>(6.0f), dt))});
        }
        if (c.activation == 3) y = b.add(Op(ops::Mul{}), {y, b.add(Op(ops::Sigmoid{}), {y})});
        if (c.activation == 4) y = b.add(Op(ops::Add{}), {y, z});
        b.output(cast(y, DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const char* mode : {"1", "0"}) {
      ::setenv("KILN_CUDA_CONV_MMA", mode, 1);
      const bool own = std::string(mode) == "1";
      for (const DType dt : {DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() + " " + std::string(dtype_name(dt)) +
                     (own ? " own" : " cuDNN"));
        std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
        ASSERT_NE(exe, nullptr);
        // The input, filter and bias rounded once each, the output once (f32 sums).
        expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 6e-2f);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        EXPECT_EQ(steps_starting(*program, "ConvMma"), own ? 1 : 0);
        EXPECT_EQ(steps_starting(*program, "Conv"), 1);
        // The image is read as it is: no padded copy (nor reorder) before the own kernel.
        if (own) {
          EXPECT_EQ(program->count_steps("Pad channels"), 0);
        }
        EXPECT_EQ(steps_starting(*program, "Relu") + steps_starting(*program, "Clip") +
                      steps_starting(*program, "Sigmoid") + steps_starting(*program, "Add"),
                  0)
            << "the epilogue runs in the convolution's step";
      }
    }
    ::unsetenv("KILN_CUDA_CONV_MMA");
  }
}

// A ReLU6 between a dense convolution and a depthwise one (MobileNetV2's expansions and stem):
// the dense convolution's epilogue is a plain ReLU (which cuDNN fuses) and the depthwise kernel
// clamps at 6 as it reads; outputs well above 6 check the bound still holds, in f32 (NCHW) and
// f16/bf16 (NHWC), with the own convolution kernel off and on.
TEST(CudaTarget, Relu6BeforeADepthwiseConvolutionClampsAsItIsRead) {
  SKIP_WITHOUT_GPU();
  Tensor expand = random_tensor(Shape{16, 8, 1, 1}, 800);
  for (float& v : expand.span<float>()) v *= 4.0f;  // |outputs| up to about 16: many above 6
  const Tensor expand_bias = random_tensor(Shape{16}, 801);
  const Tensor dw = random_tensor(Shape{16, 1, 3, 3}, 802);
  const Tensor dw_bias = random_tensor(Shape{16}, 803);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 10, 9}, 804)};
  auto build_in = [&](DType dt, float hi = 6.0f) {
    return [&, dt, hi](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto relu6 = [&](Value* v) {
        return b.add(Op(ops::Clip{}),
                     {v, k(Tensor::scalar<float>(0.0f)), k(Tensor::scalar<float>(hi))});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      x = relu6(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 16;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      x = b.add(Op(depthwise), {x, k(dw), k(dw_bias)});
      b.output(dt == DType::kF32 ? x : cast_to(b, x, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  float largest = 0.0f;
  for (float v : want[0].span<float>()) largest = std::max(largest, std::abs(v));
  // The bound matters: the same graph clipped at 1000 instead of 6 gives other outputs.
  std::shared_ptr<Executable> unbounded =
      compile_for(make_graph(inputs, build_in(DType::kF32, 1000.0f)), "ref");
  ASSERT_NE(unbounded, nullptr);
  float moved = 0.0f;
  const std::vector<Tensor> loose = run(*unbounded, inputs);
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    moved = std::max(moved, std::abs(want[0].data<float>()[i] - loose[0].data<float>()[i]));
  }
  EXPECT_GT(moved, 1.0f);
  for (const char* mode : {"0", "1"}) {
    ::setenv("KILN_CUDA_CONV_MMA", mode, 1);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " own kernel " + mode);
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      // Relative to the outputs' scale: sums of 9 terms of up to 6 times the weights.
      const float tolerance = dt == DType::kF32 ? 1e-4f : dt == DType::kF16 ? 1e-2f : 6e-2f;
      const std::vector<Tensor> got = run(*exe, inputs);
      expect_close(want, got, tolerance * std::max(1.0f, largest / 8.0f));
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
      EXPECT_EQ(steps_starting(*program, "Clip"), 0) << "the Clip runs in the convolutions";
      EXPECT_EQ(steps_starting(*program, "DepthwiseConv"), 1);
    }
  }
  ::unsetenv("KILN_CUDA_CONV_MMA");
}

// A MobileNetV2 block in f16 (expand 1x1 + ReLU6, depthwise 3x3 stride 2 + ReLU6, project 1x1):
// every convolution NHWC, so the only reorders are the graph's input and output.
TEST(CudaTarget, DepthwiseConvolutionsStayChannelsLastBetweenDenseOnes) {
  SKIP_WITHOUT_GPU();
  const Tensor expand = random_tensor(Shape{32, 8, 1, 1}, 400);
  const Tensor expand_bias = random_tensor(Shape{32}, 401);
  const Tensor dw = random_tensor(Shape{32, 1, 3, 3}, 402);
  const Tensor dw_bias = random_tensor(Shape{32}, 403);
  Tensor project = random_tensor(Shape{16, 32, 1, 1}, 404);
  for (float& v : project.span<float>()) v *= 0.25f;  // outputs of a few units, not tens
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 8, 14, 14}, 405)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto relu6 = [&](Value* v) {
        return b.add(Op(ops::Clip{}),
                     {v, k(Tensor::scalar<float>(0.0f)), k(Tensor::scalar<float>(6.0f))});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      x = relu6(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 32;
      depthwise.strides = std::vector<int64_t>{2, 2};
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      x = relu6(b.add(Op(depthwise), {x, k(dw), k(dw_bias)}));
      x = b.add(Op(ops::Conv{}), {x, k(project)});
      b.output(dt == DType::kF32 ? x : cast_to(b, x, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(DType::kF16)), "cuda");
  ASSERT_NE(exe, nullptr);
  expect_close(run(*ref, inputs), run(*exe, inputs), 3e-2f);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("DepthwiseConv+Bias+Clip"), 1);
  EXPECT_EQ(program->count_steps("Reorder NCHW>NHWC"), 1);
  EXPECT_EQ(program->count_steps("Reorder NHWC>NCHW"), 1);
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

// EfficientNet's MBConv block (expand 1x1 + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation:
// global average pool, 1x1 reduce + SiLU, 1x1 expand, Sigmoid, channel-wise Mul; project 1x1,
// residual Add) in f32 (NCHW) and f16 (NHWC): each SiLU inside its convolution's step, the
// Sigmoid and Mul one scaling step, no separate Sigmoid or Mul, no reorder of the squeeze.
TEST(CudaTarget, SiluAndSqueezeExcitationRunInsideTheirProducers) {
  SKIP_WITHOUT_GPU();
  const Tensor expand = random_tensor(Shape{32, 16, 1, 1}, 420);
  const Tensor expand_bias = random_tensor(Shape{32}, 421);
  const Tensor dw = random_tensor(Shape{32, 1, 3, 3}, 422);
  const Tensor dw_bias = random_tensor(Shape{32}, 423);
  const Tensor reduce = random_tensor(Shape{8, 32, 1, 1}, 424);
  const Tensor reduce_bias = random_tensor(Shape{8}, 425);
  const Tensor excite = random_tensor(Shape{32, 8, 1, 1}, 426);
  const Tensor excite_bias = random_tensor(Shape{32}, 427);
  Tensor project = random_tensor(Shape{16, 32, 1, 1}, 428);
  for (float& v : project.span<float>()) v *= 0.25f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 16, 14, 14}, 429)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto silu = [&](Value* v) {
        return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v})});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      Value* e = silu(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 32;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* d = silu(b.add(Op(depthwise), {e, k(dw), k(dw_bias)}));
      Value* g = b.add(Op(ops::GlobalAveragePool{}), {d});
      Value* r = silu(b.add(Op(ops::Conv{}), {g, k(reduce), k(reduce_bias)}));
      Value* sig =
          b.add(Op(ops::Sigmoid{}), {b.add(Op(ops::Conv{}), {r, k(excite), k(excite_bias)})});
      Value* scaled = b.add(Op(ops::Mul{}), {d, sig});
      Value* y = b.add(Op(ops::Add{}), {b.add(Op(ops::Conv{}), {scaled, k(project)}), x});
      b.output(dt == DType::kF32 ? y : cast_to(b, y, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF32 ? 1e-4f : 3e-2f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    // cuDNN's or the own kernel's (ConvMma), whichever tuning measured faster.
    EXPECT_EQ(program->count_steps("Conv+Bias+SiLU") + program->count_steps("ConvMma+Bias+SiLU"),
              2);
    EXPECT_EQ(program->count_steps("DepthwiseConv+Bias+SiLU"), 1);
    EXPECT_EQ(program->count_steps("Sigmoid+ChannelScale"), 1);
    EXPECT_EQ(steps_starting(*program, "Sigmoid") + steps_starting(*program, "Mul"), 1);
    // f16 runs NHWC: the squeeze's [N, C, 1, 1] values need no reorder, only the graph's input
    // and output do.
    EXPECT_EQ(steps_starting(*program, "Reorder"), dt == DType::kF16 ? 2 : 0);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
  }
}

}  // namespace
}  // namespace kiln::compiler
