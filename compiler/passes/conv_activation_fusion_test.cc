// SPDX-License-Identifier: Apache-2.0
// Conv-activation fusion, before and after — and the fused graph computes the same values on ref.
#include "compiler/passes/pass_ref_testing.h"
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

// x: [1,1,3,3] -> Conv(2 out channels, 1x1, weights {1,-1}) -> Relu -> y
void build_conv_relu(Graph& g) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 1, 3, 3}));
  Value* w = b.constant(Tensor::from_vector<float>({1, -1}).reshaped(Shape{2, 1, 1, 1}), "w");
  Value* conv = b.add(Op(ops::Conv{}), {x, w}, "conv");
  b.output(b.add(Op(ops::Relu{}), {conv}, "y"));
}

TEST(ConvActivationFusion, FoldsASoleReluIntoTheConv) {
  Graph g("fuse");
  build_conv_relu(g);
  auto pass = make_conv_activation_fusion();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph fuse(%x: f32[1,1,3,3]) {\n"
                             "  %w: f32[2,1,1,1] = Constant[value=f32[2,1,1,1]{1,-1}]()  # \"w\"\n"
                             "  %conv: f32[1,2,3,3] = Conv[auto_pad=\"NOTSET\", group=1](%x, %w)"
                             "  # \"conv\"\n"
                             "  %y: f32[1,2,3,3] = Relu(%conv)  # \"y\"\n"
                             "  return %y\n"
                             "}\n",
                             "graph fuse(%x: f32[1,1,3,3]) {\n"
                             "  %w: f32[2,1,1,1] = Constant[value=f32[2,1,1,1]{1,-1}]()  # \"w\"\n"
                             "  %y: f32[1,2,3,3] = Conv[activation=\"Relu\", auto_pad=\"NOTSET\", "
                             "group=1](%x, %w)  # \"conv\"\n"
                             "  return %y\n"
                             "}\n"));
}

TEST(ConvActivationFusion, LeavesAConvWithOtherUsersOrReturned) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 1, 2, 2}));
  Value* w = b.constant(Tensor::from_vector<float>({2}).reshaped(Shape{1, 1, 1, 1}), "w");
  Value* shared = b.add(Op(ops::Conv{}), {x, w}, "shared");
  b.output(b.add(Op(ops::Relu{}), {shared}, "r1"));
  b.output(b.add(Op(ops::Sigmoid{}), {shared}, "s"));
  Value* returned = b.add(Op(ops::Conv{}), {x, w}, "returned");
  b.output(returned);
  b.output(b.add(Op(ops::Relu{}), {returned}, "r2"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_conv_activation_fusion()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(print_graph(g).find("activation"), std::string::npos) << print_graph(g);
}

TEST(ConvActivationFusion, FusedGraphComputesTheSameValuesOnRef) {
  Tensor x(DType::kF32, Shape{1, 1, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i) - 4.0f;
  std::vector<std::vector<float>> results;
  for (bool fuse : {false, true}) {
    auto g = std::make_shared<Graph>("fuse");
    build_conv_relu(*g);
    if (fuse) {
      ASSERT_TRUE(make_conv_activation_fusion()->run(*g).ok());
    }
    results.push_back(testing::run_on_ref(g, {x}));
  }
  ASSERT_EQ(results[0].size(), 18u);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[1][0], 0.0f);  // channel 0 at x=-4: relu(-4)
  EXPECT_EQ(results[1][9], 4.0f);  // channel 1 (weight -1) at x=-4
}

}  // namespace
}  // namespace kiln::compiler
