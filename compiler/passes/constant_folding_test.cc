// SPDX-License-Identifier: Apache-2.0
// Constant folding, before and after.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

TEST(ConstantFolding, FoldsConstantSubgraphsAndStaticShapes) {
  Graph g("cf");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 3}));
  Value* c1 = b.constant(Tensor::from_vector<float>({1, 2, 3}), "c1");
  Value* c2 = b.constant(Tensor::from_vector<float>({10, 20, 30}), "c2");
  Value* s = b.add(Op(ops::Add{}), {c1, c2}, "s");
  b.output(b.add(Op(ops::Add{}), {x, s}, "y"));
  b.output(b.add(Op(ops::Shape{}), {x}, "shape"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();

  auto pass = make_constant_folding();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph cf(%x: f32[2,3]) {\n"
                             "  %c1: f32[3] = Constant[value=f32[3]{1,2,3}]()  # \"c1\"\n"
                             "  %c2: f32[3] = Constant[value=f32[3]{10,20,30}]()  # \"c2\"\n"
                             "  %s: f32[3] = Add(%c1, %c2)  # \"s\"\n"
                             "  %y: f32[2,3] = Add(%x, %s)  # \"y\"\n"
                             "  %shape: i64[2] = Shape[start=0](%x)  # \"shape\"\n"
                             "  return %y, %shape\n"
                             "}\n",
                             "graph cf(%x: f32[2,3]) {\n"
                             "  %s_folded: f32[3] = Constant[value=f32[3]{11,22,33}]()  # \"s\"\n"
                             "  %y: f32[2,3] = Add(%x, %s_folded)  # \"y\"\n"
                             "  %shape: i64[2] = Constant[value=i64[2]{2,3}]()  # \"shape\"\n"
                             "  return %y, %shape\n"
                             "}\n"));
}

TEST(ConstantFolding, LeavesRandomOpsAndDynamicShapes) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("N"), 3}));
  b.output(b.add(Op(ops::Shape{}), {x}, "shape"));
  b.output(
      b.add(Op(ops::RandomUniformLike{}), {b.constant(Tensor(DType::kF32, Shape{2}), "z")}, "r"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  std::string before = print_graph(g);
  Result<bool> changed = make_constant_folding()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(print_graph(g), before);
}

TEST(ConstantFolding, IsDeterministic) {
  auto build = [](Graph& g) {
    GraphBuilder b(g);
    Value* x = b.input("x", f32({4}));
    Value* c = b.add(Op(ops::Mul{}),
                     {b.constant(Tensor::from_vector<float>({2, 2, 2, 2}), "two"),
                      b.constant(Tensor::from_vector<float>({1, 2, 3, 4}), "k")},
                     "scaled");
    b.output(b.add(Op(ops::Add{}), {x, c}, "y"));
  };
  Graph a("d"), b("d");
  build(a);
  build(b);
  ASSERT_TRUE(make_constant_folding()->run(a).ok());
  ASSERT_TRUE(make_constant_folding()->run(b).ok());
  EXPECT_EQ(print_graph(a), print_graph(b));
}

}  // namespace
}  // namespace kiln::compiler
