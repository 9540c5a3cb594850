// SPDX-License-Identifier: Apache-2.0
// Common-subexpression elimination, before and after.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

TEST(CommonSubexpressionElimination, MergesEqualNodesAndConstants) {
  Graph g("cse");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({4}));
  Value* a = b.add(Op(ops::Relu{}), {x}, "a");
  Value* a2 = b.add(Op(ops::Relu{}), {x}, "a2");
  Value* k1 = b.constant(Tensor::from_vector<float>({1, 2, 3, 4}), "k1");
  Value* k2 = b.constant(Tensor::from_vector<float>({1, 2, 3, 4}), "k2");
  Value* s = b.add(Op(ops::Add{}), {a, k1}, "s");
  Value* s2 = b.add(Op(ops::Add{}), {a2, k2}, "s2");
  b.output(b.add(Op(ops::Mul{}), {s, s2}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_common_subexpression_elimination();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph cse(%x: f32[4]) {\n"
                             "  %a: f32[4] = Relu(%x)  # \"a\"\n"
                             "  %a2: f32[4] = Relu(%x)  # \"a2\"\n"
                             "  %k1: f32[4] = Constant[value=f32[4]{1,2,3,4}]()  # \"k1\"\n"
                             "  %k2: f32[4] = Constant[value=f32[4]{1,2,3,4}]()  # \"k2\"\n"
                             "  %s: f32[4] = Add(%a, %k1)  # \"s\"\n"
                             "  %s2: f32[4] = Add(%a2, %k2)  # \"s2\"\n"
                             "  %y: f32[4] = Mul(%s, %s2)  # \"y\"\n"
                             "  return %y\n"
                             "}\n",
                             "graph cse(%x: f32[4]) {\n"
                             "  %a: f32[4] = Relu(%x)  # \"a\"\n"
                             "  %k1: f32[4] = Constant[value=f32[4]{1,2,3,4}]()  # \"k1\"\n"
                             "  %s: f32[4] = Add(%a, %k1)  # \"s\"\n"
                             "  %y: f32[4] = Mul(%s, %s)  # \"y\"\n"
                             "  return %y\n"
                             "}\n"));
}

TEST(CommonSubexpressionElimination, KeepsDifferentAttributesAndRandomOps) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({4}));
  ops::LeakyRelu l1, l2;
  l1.alpha = 0.1f;
  l2.alpha = 0.2f;
  b.output(b.add(Op(l1), {x}, "l1"));
  b.output(b.add(Op(l2), {x}, "l2"));
  b.output(b.add(Op(ops::RandomUniformLike{}), {x}, "r1"));
  b.output(b.add(Op(ops::RandomUniformLike{}), {x}, "r2"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_common_subexpression_elimination()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.num_nodes(), 4);
}

}  // namespace
}  // namespace kiln::compiler
