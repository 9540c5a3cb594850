// SPDX-License-Identifier: Apache-2.0
// Layer-norm fusion, before and after — and the fused graph computes the same values on ref.
#include <cmath>

#include "compiler/passes/pass_ref_testing.h"
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

Value* mean_of(GraphBuilder& b, Value* x, const std::string& name) {
  ops::ReduceMean op;
  op.axes = std::vector<int64_t>{-1};
  return b.add(Op(op), {x}, name);
}

// x: [2,4] -> LayerNorm over the last axis written out as exporters before opset 17 do, with the
// square as Pow(d, 2) or Mul(d, d), and with or without the scale and bias.
void build_layer_norm(Graph& g, bool pow, bool affine) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 4}));
  Value* d = b.add(Op(ops::Sub{}), {x, mean_of(b, x, "mean")}, "d");
  Value* sq = pow ? b.add(Op(ops::Pow{}), {d, b.constant(Tensor::scalar(2.0f), "two")}, "sq")
                  : b.add(Op(ops::Mul{}), {d, d}, "sq");
  Value* var = mean_of(b, sq, "var");
  Value* std = b.add(
      Op(ops::Sqrt{}),
      {b.add(Op(ops::Add{}), {var, b.constant(Tensor::scalar(1e-5f), "eps")}, "var_eps")}, "std");
  Value* y = b.add(Op(ops::Div{}), {d, std}, "norm");
  if (affine) {
    y = b.add(Op(ops::Mul{}), {b.constant(Tensor::from_vector<float>({1, 2, 3, 4}), "gamma"), y},
              "scaled");
    y = b.add(Op(ops::Add{}), {y, b.constant(Tensor::from_vector<float>({0, 0, 1, -1}), "beta")},
              "y");
  }
  b.output(y);
}

TEST(LayerNormFusion, FusesThePatternWithScaleAndBias) {
  Graph g("ln");
  build_layer_norm(g, /*pow=*/true, /*affine=*/true);
  auto pass = make_layer_norm_fusion();
  EXPECT_TRUE(expect_rewrite(
      g, *pass,
      "graph ln(%x: f32[2,4]) {\n"
      "  %mean: f32[2,1] = ReduceMean[axes=[-1], keepdims=1, noop_with_empty_axes=0](%x)  # "
      "\"mean\"\n"
      "  %d: f32[2,4] = Sub(%x, %mean)  # \"d\"\n"
      "  %two: f32[] = Constant[value=f32[]{2}]()  # \"two\"\n"
      "  %sq: f32[2,4] = Pow(%d, %two)  # \"sq\"\n"
      "  %var: f32[2,1] = ReduceMean[axes=[-1], keepdims=1, noop_with_empty_axes=0](%sq)  # "
      "\"var\"\n"
      "  %eps: f32[] = Constant[value=f32[]{1e-05}]()  # \"eps\"\n"
      "  %var_eps: f32[2,1] = Add(%var, %eps)  # \"var_eps\"\n"
      "  %std: f32[2,1] = Sqrt(%var_eps)  # \"std\"\n"
      "  %norm: f32[2,4] = Div(%d, %std)  # \"norm\"\n"
      "  %gamma: f32[4] = Constant[value=f32[4]{1,2,3,4}]()  # \"gamma\"\n"
      "  %scaled: f32[2,4] = Mul(%gamma, %norm)  # \"scaled\"\n"
      "  %beta: f32[4] = Constant[value=f32[4]{0,0,1,-1}]()  # \"beta\"\n"
      "  %y: f32[2,4] = Add(%scaled, %beta)  # \"y\"\n"
      "  return %y\n"
      "}\n",
      "graph ln(%x: f32[2,4]) {\n"
      "  %norm_scale: f32[4] = Constant[value=f32[4]{1,2,3,4}]()  # \"norm_scale\"\n"
      "  %norm_bias: f32[4] = Constant[value=f32[4]{0,0,1,-1}]()  # \"norm_bias\"\n"
      "  %y: f32[2,4] = LayerNormalization[axis=-1, epsilon=1e-05, stash_type=f32](%x, "
      "%norm_scale, %norm_bias)  # \"norm\"\n"
      "  return %y\n"
      "}\n"));
}

TEST(LayerNormFusion, FusesEachPatternOnceNotOnceARound) {
  // The pattern's nodes stay until dead-code elimination: the pass alone must not fuse the dead
  // copy again on each of its rounds.
  Graph g("once");
  build_layer_norm(g, /*pow=*/false, /*affine=*/true);
  Result<bool> changed = make_layer_norm_fusion()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  int fused = 0;
  for (const auto& node : g.nodes()) fused += node->kind() == OpKind::kLayerNormalization ? 1 : 0;
  EXPECT_EQ(fused, 1) << print_graph(g);
}

TEST(LayerNormFusion, LeavesAPatternWhoseMeanIsUsedElsewhere) {
  Graph g("keep");
  build_layer_norm(g, /*pow=*/true, /*affine=*/false);
  GraphBuilder b(g);
  for (const auto& node : g.nodes()) {
    if (node->name() == "mean") b.output(node->output(0));
  }
  Result<bool> changed = make_layer_norm_fusion()->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(print_graph(g).find("LayerNormalization"), std::string::npos) << print_graph(g);
}

TEST(LayerNormFusion, FusedGraphComputesTheSameValuesOnRef) {
  Tensor x(DType::kF32, Shape{2, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(static_cast<float>(i));
  for (bool affine : {false, true}) {
    std::vector<std::vector<float>> results;
    for (bool fuse : {false, true}) {
      auto g = std::make_shared<Graph>("ln");
      build_layer_norm(*g, /*pow=*/!affine, affine);
      if (fuse) {
        Result<bool> changed = make_layer_norm_fusion()->run(*g);
        ASSERT_TRUE(changed.ok() && *changed) << print_graph(*g);
        ASSERT_TRUE(make_dead_code_elimination()->run(*g).ok());
        EXPECT_EQ(g->num_nodes(), affine ? 3 : 2) << print_graph(*g);
      }
      results.push_back(testing::run_on_ref(g, {x}));
    }
    ASSERT_EQ(results[1].size(), 8u);
    for (size_t i = 0; i < results[0].size(); ++i) {
      EXPECT_NEAR(results[0][i], results[1][i], 1e-5f) << i;
    }
    // Row 0 of x is sin(0..3): normalized, its mean is 0 (times the scale, plus the bias).
    if (!affine) {
      EXPECT_NEAR(results[1][0] + results[1][1] + results[1][2] + results[1][3], 0.0f, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
