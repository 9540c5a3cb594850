// SPDX-License-Identifier: Apache-2.0
// BatchNorm folding, before and after — and the folded model computes the same values.
#include "compiler/passes/pass_test_util.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

using testing::f32;

// x: [1,2,3,3] -> Conv(2 out channels, 1x1, bias) -> BatchNormalization -> y
void build_conv_bn(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 2, 3, 3}));
  Value* w = b.constant(
      Tensor::from_vector<float>(std::vector<float>{1, 2, 3, 4}).reshaped(Shape{2, 2, 1, 1}), "w");
  Value* bias = b.constant(Tensor::from_vector<float>({0.5f, -1}), "b");
  Value* conv = b.add(Op(ops::Conv{}), {x, w, bias}, "conv");
  Value* gamma = b.constant(Tensor::from_vector<float>({2, 0.5f}), "gamma");
  Value* beta = b.constant(Tensor::from_vector<float>({1, -1}), "beta");
  Value* mean = b.constant(Tensor::from_vector<float>({0.25f, 3}), "mean");
  Value* var = b.constant(Tensor::from_vector<float>({4, 0.25f}), "var");
  b.output(b.add(Op(ops::BatchNormalization{}), {conv, gamma, beta, mean, var}, "bn"));
}

std::vector<float> run_ref(std::shared_ptr<Graph> g, const Tensor& x, bool optimize) {
  auto target = make_target("ref");
  CompileOptions options;
  options.optimize = optimize;
  auto exe = compile(std::move(g), **target, options);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = (*exe)->run({Argument(x)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  auto span = (*out)[0].tensor().span<float>();
  return {span.begin(), span.end()};
}

TEST(BatchNormFolding, FoldsIntoConvWeightsAndBias) {
  Graph g("bn");
  build_conv_bn(g);
  auto pass = make_batchnorm_folding();
  Result<bool> changed = pass->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(make_dead_code_elimination()->run(g).ok());
  // scale = gamma / sqrt(var + eps): {1, 1} (eps 1e-5 aside); shift = beta - mean * scale.
  std::string ir = print_graph(g);
  EXPECT_EQ(ir.find("BatchNormalization"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%bn: f32[1,2,3,3] = Conv"), std::string::npos) << ir;
  EXPECT_TRUE(verify_graph(g).ok());
}

TEST(BatchNormFolding, FoldedGraphComputesTheSameValues) {
  Tensor x(DType::kF32, Shape{1, 2, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  auto plain = std::make_shared<Graph>("bn");
  auto folded = std::make_shared<Graph>("bn");
  build_conv_bn(*plain);
  build_conv_bn(*folded);
  ASSERT_TRUE(make_batchnorm_folding()->run(*folded).ok());
  std::vector<float> want = run_ref(plain, x, /*optimize=*/false);
  std::vector<float> got = run_ref(folded, x, /*optimize=*/false);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-5) << i;
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// x: [2,3] -> Gemm(transB, B: [4,3], C: [4], alpha 0.5, beta 2) -> BatchNormalization over 4.
void build_gemm_bn(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", testing::f32({2, 3}));
  std::vector<float> wb(12);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = static_cast<float>(i) * 0.25f - 1.0f;
  Value* w = b.constant(Tensor::from_vector<float>(wb).reshaped(Shape{4, 3}), "w");
  Value* c = b.constant(Tensor::from_vector<float>({1, -2, 0.5f, 3}), "c");
  ops::Gemm gemm;
  gemm.transB = 1;
  gemm.alpha = 0.5f;
  gemm.beta = 2.0f;
  Value* y = b.add(Op(gemm), {x, w, c}, "fc");
  Value* gamma = b.constant(Tensor::from_vector<float>({1, 2, 0.5f, -1}), "gamma");
  Value* beta = b.constant(Tensor::from_vector<float>({0, 1, -1, 2}), "beta");
  Value* mean = b.constant(Tensor::from_vector<float>({0.5f, -0.5f, 1, 0}), "mean");
  Value* var = b.constant(Tensor::from_vector<float>({1, 4, 0.25f, 9}), "var");
  b.output(b.add(Op(ops::BatchNormalization{}), {y, gamma, beta, mean, var}, "bn"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
}

TEST(BatchNormFolding, FoldsIntoGemmWithTheSameValues) {
  Tensor x = Tensor::from_vector<float>({1, -2, 3, 0.5f, 4, -1}).reshaped(Shape{2, 3});
  auto plain = std::make_shared<Graph>("gemm_bn");
  auto folded = std::make_shared<Graph>("gemm_bn");
  build_gemm_bn(*plain);
  build_gemm_bn(*folded);
  Result<bool> changed = make_batchnorm_folding()->run(*folded);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(make_dead_code_elimination()->run(*folded).ok());
  std::string ir = print_graph(*folded);
  EXPECT_EQ(ir.find("BatchNormalization"), std::string::npos) << ir;
  EXPECT_NE(ir.find("beta=1"), std::string::npos) << ir;
  std::vector<float> want = run_ref(plain, x, /*optimize=*/false);
  std::vector<float> got = run_ref(folded, x, /*optimize=*/false);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-4) << i;
}

}  // namespace
}  // namespace kiln::compiler
