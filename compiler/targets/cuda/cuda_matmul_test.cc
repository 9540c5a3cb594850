// SPDX-License-Identifier: Apache-2.0
// MatMul and Gemm on the cuda target (cuBLASLt) against ref (fixed seeds), with their epilogues:
// bias, ReLU and the GELU of a transformer MLP; every case skips where no GPU is present.
#include "compiler/targets/cuda/cuda_testing.h"

namespace kiln::compiler {
namespace {

TEST(CudaTarget, GemmAndMatMulMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{10, 24}, 30);  // [N, K] for transB
  const Tensor bias = random_tensor(Shape{10}, 31);
  const Tensor w2 = random_tensor(Shape{10, 7}, 32);
  const std::vector<Tensor> inputs = {random_tensor(Shape{5, 24}, 33),
                                      random_tensor(Shape{3, 4, 6}, 34),
                                      random_tensor(Shape{3, 6, 2}, 35)};
  auto steps = expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Gemm gemm;
    gemm.transB = 1;
    Value* y = b.add(Op(gemm), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* r = b.add(Op(ops::Relu{}), {y});
    b.output(b.add(Op(ops::MatMul{}), {r, b.constant(w2, "w2")}));
    b.output(b.add(Op(ops::MatMul{}), {in[1], in[2]}));  // batched
  });
  EXPECT_EQ(steps.first, 3);  // Gemm+Bias+Relu, MatMul, batched MatMul
  EXPECT_EQ(steps.second, 3);
}

// A transformer MLP (Linear, exact GELU as exported, Linear): in f16 and bf16 the GELU runs as
// cuBLASLt's GELU_BIAS epilogue of the first matmul (the tanh approximation: within f16's
// tolerance), in f32 as its own exact step; against ref in f32.
TEST(CudaTarget, GeluRunsInTheMatmulEpilogueInHalfPrecision) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = scaled_random(Shape{64, 256}, 220, 0.25f);
  const Tensor b1 = random_tensor(Shape{256}, 221);
  const Tensor w2 = scaled_random(Shape{256, 64}, 222, 0.1f);
  const Tensor b2 = random_tensor(Shape{64}, 223);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 24, 64}, 224)};
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      const bool half = dt != DType::kF32;
      auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto scalar = [&](float v) { return k(Tensor::scalar<float>(v)); };
      Value* h = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {cast(in[0], dt), k(w1)}), k(b1)});
      Value* erf = cast(b.add(Op(ops::Erf{}),
                              {cast(b.add(Op(ops::Div{}), {h, scalar(1.4142135f)}), DType::kF32)}),
                        dt);
      Value* gelu = b.add(
          Op(ops::Mul{}),
          {b.add(Op(ops::Mul{}), {h, b.add(Op(ops::Add{}), {erf, scalar(1)})}), scalar(0.5f)});
      Value* y = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {gelu, k(w2)}), k(b2)});
      b.output(cast(y, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs),
                 dt == DType::kF16    ? 1e-2f
                 : dt == DType::kBF16 ? 6e-2f
                                      : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->count_steps("MatMul+Bias+Gelu"), dt == DType::kF32 ? 0 : 1);
    EXPECT_EQ(program->count_steps("Gelu"), dt == DType::kF32 ? 1 : 0);
    EXPECT_EQ(program->count_steps("MatMul+Bias"), dt == DType::kF32 ? 2 : 1);
  }
}

// The same MLP with the Gelu op (as ONNX opset 20 and com.microsoft Gelu/FastGelu import): in f16
// and bf16 it runs as the GELU_BIAS epilogue too, in f32 as one elementwise step, either form; the
// Swish op after the second matmul runs on the device too.
TEST(CudaTarget, GeluOpRunsInTheMatmulEpilogueInHalfPrecision) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = scaled_random(Shape{64, 256}, 230, 0.25f);
  const Tensor b1 = random_tensor(Shape{256}, 231);
  const Tensor w2 = scaled_random(Shape{256, 64}, 232, 0.1f);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 24, 64}, 234)};
  for (const std::string form : {"none", "tanh"}) {
    auto build = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        const bool half = dt != DType::kF32;
        auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
        auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
        ops::Gelu gelu;
        gelu.approximate = form;
        ops::Swish swish;
        swish.alpha = 1.5f;
        Value* h =
            b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {cast(in[0], dt), k(w1)}), k(b1)});
        Value* y = b.add(Op(ops::MatMul{}), {b.add(Op(gelu), {h}), k(w2)});
        b.output(cast(b.add(Op(swish), {y}), DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(form + " " + std::string(dtype_name(dt)));
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      expect_close(want, run(*exe, inputs),
                   dt == DType::kF16    ? 1e-2f
                   : dt == DType::kBF16 ? 6e-2f
                                        : 1e-4f);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->count_steps("MatMul+Bias+Gelu"), dt == DType::kF32 ? 0 : 1);
      EXPECT_EQ(program->count_steps("Gelu"), dt == DType::kF32 ? 1 : 0);
      // In f16 and bf16 the Swish joins the Cast after it in one generated kernel.
      if (dt == DType::kF32) {
        EXPECT_EQ(program->count_steps("Swish"), 1);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
