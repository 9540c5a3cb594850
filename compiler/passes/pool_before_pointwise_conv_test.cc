// SPDX-License-Identifier: Apache-2.0
// Pool before pointwise Conv, before and after — and the rewritten graph computes the same values.

#include "compiler/passes/pass_ref_testing.h"
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;
using testing::random_tensor;
using testing::run_on_ref;

ops::AveragePool pool_2x2() {
  ops::AveragePool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  return pool;
}

// DenseNet's transition: x [1,8,4,4] -> Relu -> Conv 1x1 (4 outputs, bias) -> AveragePool 2x2.
void build_transition(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 8, 4, 4}));
  Value* relu = b.add(Op(ops::Relu{}), {x}, "relu");
  Value* w = b.constant(random_tensor(Shape{4, 8, 1, 1}, 1), "w");
  Value* bias = b.constant(Tensor::from_vector<float>({0.5f, -0.25f, 0, 1}), "bias");
  Value* conv = b.add(Op(ops::Conv{}), {relu, w, bias}, "conv");
  b.output(b.add(Op(pool_2x2()), {conv}, "pool"));
}

TEST(PoolBeforePointwiseConv, PoolsTheConvInput) {
  Graph g("transition");
  build_transition(g);
  auto pass = make_pool_before_pointwise_conv();
  EXPECT_TRUE(expect_rewrite(
      g, *pass,
      "graph transition(%x: f32[1,8,4,4]) {\n"
      "  %relu: f32[1,8,4,4] = Relu(%x)  # \"relu\"\n"
      "  %w: f32[4,8,1,1] = Constant[value=f32[4,8,1,1]]()  # \"w\"\n"
      "  %bias: f32[4] = Constant[value=f32[4]{0.5,-0.25,0,1}]()  # \"bias\"\n"
      "  %conv: f32[1,4,4,4] = Conv[auto_pad=\"NOTSET\", group=1](%relu, %w, %bias)  # \"conv\"\n"
      "  %pool: f32[1,4,2,2] = AveragePool[auto_pad=\"NOTSET\", ceil_mode=0, count_include_pad=0, "
      "kernel_shape=[2,2], strides=[2,2]](%conv)  # \"pool\"\n"
      "  return %pool\n"
      "}\n",
      "graph transition(%x: f32[1,8,4,4]) {\n"
      "  %relu: f32[1,8,4,4] = Relu(%x)  # \"relu\"\n"
      "  %w: f32[4,8,1,1] = Constant[value=f32[4,8,1,1]]()  # \"w\"\n"
      "  %bias: f32[4] = Constant[value=f32[4]{0.5,-0.25,0,1}]()  # \"bias\"\n"
      "  %pool_1: f32[1,8,2,2] = AveragePool[auto_pad=\"NOTSET\", ceil_mode=0, "
      "count_include_pad=0, kernel_shape=[2,2], strides=[2,2]](%relu)  # \"pool_1\"\n"
      "  %pool: f32[1,4,2,2] = Conv[auto_pad=\"NOTSET\", group=1](%pool_1, %w, %bias)  # "
      "\"conv_1\"\n"
      "  return %pool\n"
      "}\n"));
}

TEST(PoolBeforePointwiseConv, LeavesPaddedPoolsWideKernelsAndSharedConvs) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 8, 4, 4}));
  Value* w1 = b.constant(random_tensor(Shape{4, 8, 1, 1}, 2), "w1");
  ops::AveragePool padded = pool_2x2();
  padded.pads = std::vector<int64_t>{1, 1, 1, 1};
  padded.count_include_pad = 1;
  b.output(b.add(Op(padded), {b.add(Op(ops::Conv{}), {x, w1}, "c1")}, "padded"));
  Value* w3 = b.constant(random_tensor(Shape{4, 8, 3, 3}, 3), "w3");
  ops::Conv k3;
  k3.pads = std::vector<int64_t>{1, 1, 1, 1};
  b.output(b.add(Op(pool_2x2()), {b.add(Op(k3), {x, w3}, "c3")}, "wide"));
  Value* shared = b.add(Op(ops::Conv{}), {x, w1}, "shared");
  b.output(b.add(Op(pool_2x2()), {shared}, "pooled_shared"));
  b.output(shared);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_pool_before_pointwise_conv()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_FALSE(*changed) << print_graph(g);
}

TEST(PoolBeforePointwiseConv, RewrittenGraphComputesTheSameValuesOnRef) {
  const Tensor x = random_tensor(Shape{1, 8, 4, 4}, 10);
  std::vector<std::vector<float>> results;
  for (bool rewrite : {false, true}) {
    auto g = std::make_shared<Graph>("transition");
    build_transition(*g);
    if (rewrite) {
      Result<bool> changed = make_pool_before_pointwise_conv()->run(*g);
      ASSERT_TRUE(changed.ok() && *changed);
    }
    results.push_back(run_on_ref(g, {x}));
  }
  ASSERT_EQ(results[0].size(), 16u);
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_NEAR(results[0][i], results[1][i], 1e-5f) << i;
    EXPECT_NE(results[0][i], 0.0f) << i;  // real values to compare
  }
}

}  // namespace
}  // namespace kiln::compiler
