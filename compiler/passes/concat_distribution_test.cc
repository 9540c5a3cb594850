// SPDX-License-Identifier: Apache-2.0
// Concat distribution, before and after — and the rewritten graph computes the same values.
#include <cmath>

#include "compiler/passes/pass_ref_testing.h"
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;
using testing::random_tensor;
using testing::run_on_ref;

// a: [1,16,4,4], b: [1,32,4,4] -> Concat -> MaxPool 2x2 -> Conv 1x1 (8 outputs, bias) -> Relu.
void build_fire(Graph& g) {
  GraphBuilder b(g);
  Value* a = b.input("a", f32({1, 16, 4, 4}));
  Value* c = b.input("b", f32({1, 32, 4, 4}));
  Value* cat = b.add(Op(ops::Concat{1}), {a, c}, "cat");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  Value* pooled = b.add(Op(pool), {cat}, "pool");
  Value* w = b.constant(random_tensor(Shape{8, 48, 1, 1}, 1), "w");
  Value* bias =
      b.constant(Tensor::from_vector<float>({0.5f, -0.25f, 0, 1, -1, 0.125f, 2, -2}), "bias");
  Value* conv = b.add(Op(ops::Conv{}), {pooled, w, bias}, "conv");
  b.output(b.add(Op(ops::Relu{}), {conv}, "y"));
}

TEST(ConcatDistribution, MovesTheConcatThroughThePoolAndSplitsTheConv) {
  Graph g("fire");
  build_fire(g);
  const std::string before = print_graph(g);
  auto pass = make_concat_distribution();
  Result<bool> changed = pass->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(make_dead_code_elimination()->run(g).ok());
  const std::string after = print_graph(g);
  EXPECT_TRUE(verify_graph(g).ok()) << after;
  EXPECT_NE(before.find("Concat"), std::string::npos);
  EXPECT_EQ(after.find("Concat"), std::string::npos) << after;
  EXPECT_EQ(after,
            "graph fire(%a: f32[1,16,4,4], %b: f32[1,32,4,4]) {\n"
            "  %pool_0_1: f32[1,16,2,2] = MaxPool[auto_pad=\"NOTSET\", ceil_mode=0, "
            "kernel_shape=[2,2], storage_order=0, strides=[2,2]](%a)  # \"pool_0\"\n"
            "  %pool_1_1: f32[1,32,2,2] = MaxPool[auto_pad=\"NOTSET\", ceil_mode=0, "
            "kernel_shape=[2,2], storage_order=0, strides=[2,2]](%b)  # \"pool_1\"\n"
            "  %bias: f32[8] = Constant[value=f32[8]{0.5,-0.25,0,1,-1,0.125,2,-2}]()  # \"bias\"\n"
            "  %conv_0_w: f32[8,16,1,1] = Constant[value=f32[8,16,1,1]]()  # \"conv_0_w\"\n"
            "  %conv_0_1: f32[1,8,2,2] = Conv[auto_pad=\"NOTSET\", group=1](%pool_0_1, %conv_0_w, "
            "%bias)  # \"conv_0\"\n"
            "  %conv_1_w: f32[8,32,1,1] = Constant[value=f32[8,32,1,1]]()  # \"conv_1_w\"\n"
            "  %conv_1_1: f32[1,8,2,2] = Conv[auto_pad=\"NOTSET\", group=1](%pool_1_1, %conv_1_w)"
            "  # \"conv_1\"\n"
            "  %conv_1_add_1: f32[1,8,2,2] = Add(%conv_1_1, %conv_0_1)  # \"conv_1_add\"\n"
            "  %y: f32[1,8,2,2] = Relu(%conv_1_add_1)  # \"y\"\n"
            "  return %y\n"
            "}\n");
}

TEST(ConcatDistribution, LeavesConcatsWithOtherUsersThinPiecesGroupedOrWideConvs) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* a = b.input("a", f32({1, 16, 4, 4}));
  Value* c = b.input("b", f32({1, 8, 4, 4}));
  Value* thin = b.add(Op(ops::Concat{1}), {a, c}, "thin");
  Value* w = b.constant(random_tensor(Shape{4, 24, 1, 1}, 3), "w");
  b.output(b.add(Op(ops::Conv{}), {thin, w}, "thin_conv"));
  Value* shared = b.add(Op(ops::Concat{1}), {a, a}, "shared");
  Value* w2 = b.constant(random_tensor(Shape{4, 32, 1, 1}, 4), "w2");
  b.output(b.add(Op(ops::Conv{}), {shared, w2}, "shared_conv"));
  b.output(shared);
  ops::Conv grouped;
  grouped.group = 2;
  Value* w3 = b.constant(random_tensor(Shape{4, 16, 1, 1}, 5), "w3");
  Value* cat = b.add(Op(ops::Concat{1}), {a, a}, "cat");
  b.output(b.add(Op(grouped), {cat, w3}, "grouped_conv"));
  // More outputs than inputs: the sums would move more bytes than the Concat copies.
  Value* wide = b.add(Op(ops::Concat{1}), {a, a}, "wide");
  Value* w4 = b.constant(random_tensor(Shape{64, 32, 1, 1}, 6), "w4");
  b.output(b.add(Op(ops::Conv{}), {wide, w4}, "wide_conv"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_concat_distribution()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_FALSE(*changed) << print_graph(g);
}

TEST(ConcatDistribution, RewrittenGraphComputesTheSameValuesOnRef) {
  const Tensor a = random_tensor(Shape{1, 16, 4, 4}, 10);
  const Tensor c = random_tensor(Shape{1, 32, 4, 4}, 11);
  std::vector<std::vector<float>> results;
  for (bool rewrite : {false, true}) {
    auto g = std::make_shared<Graph>("fire");
    build_fire(*g);
    if (rewrite) {
      ASSERT_TRUE(make_concat_distribution()->run(*g).ok());
    }
    results.push_back(run_on_ref(g, {a, c}));
  }
  ASSERT_EQ(results[0].size(), 32u);
  int positive = 0;
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_NEAR(results[0][i], results[1][i], 1e-5f) << i;
    positive += results[0][i] > 0 ? 1 : 0;
  }
  EXPECT_GT(positive, 4);  // the Relu leaves real values to compare
}

}  // namespace
}  // namespace kiln::compiler
