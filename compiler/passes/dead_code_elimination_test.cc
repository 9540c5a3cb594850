// SPDX-License-Identifier: Apache-2.0
// Dead-code elimination, before and after.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

TEST(DeadCodeElimination, RemovesUnusedChainsKeepsOutputs) {
  Graph g("dce");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({4}));
  Value* unused = b.add(Op(ops::Neg{}), {x}, "unused");
  b.add(Op(ops::Abs{}), {unused}, "also_unused");
  b.output(b.add(Op(ops::Relu{}), {x}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_dead_code_elimination();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph dce(%x: f32[4]) {\n"
                             "  %unused: f32[4] = Neg(%x)  # \"unused\"\n"
                             "  %also_unused: f32[4] = Abs(%unused)  # \"also_unused\"\n"
                             "  %y: f32[4] = Relu(%x)  # \"y\"\n"
                             "  return %y\n"
                             "}\n",
                             "graph dce(%x: f32[4]) {\n"
                             "  %y: f32[4] = Relu(%x)  # \"y\"\n"
                             "  return %y\n"
                             "}\n",
                             /*then_dce=*/false));
  Result<bool> again = pass->run(g);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}


TEST(DeadCodeElimination, ADeadIfReleasesWhatItsBranchesRead) {
  Graph g("dce");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({4}));
  Value* only_for_the_branch = b.add(Op(ops::Neg{}), {x}, "neg");
  auto then_branch = std::make_shared<Graph>("then", &g);
  GraphBuilder tb(*then_branch);
  tb.output(tb.add(Op(ops::Abs{}), {only_for_the_branch}, "abs"));
  auto else_branch = std::make_shared<Graph>("else", &g);
  GraphBuilder eb(*else_branch);
  eb.output(eb.add(Op(ops::Relu{}), {x}, "relu"));
  ops::If op;
  op.then_branch = then_branch;
  op.else_branch = else_branch;
  b.add(Op(op), {b.input("c", TensorType(DType::kBool, Shape({})))}, "dead_if");
  b.output(b.add(Op(ops::Sigmoid{}), {x}, "y"));
  ASSERT_TRUE(b.status().ok() && tb.status().ok() && eb.status().ok()) << b.status().to_string();
  ASSERT_TRUE(make_dead_code_elimination()->run(g).ok());
  EXPECT_EQ(print_graph(g),
            "graph dce(%x: f32[4], %c: bool[]) {\n"
            "  %y: f32[4] = Sigmoid(%x)  # \"y\"\n"
            "  return %y\n"
            "}\n");
  EXPECT_EQ(x->uses().size(), 1u) << "only Sigmoid uses x";
}

}  // namespace
}  // namespace kiln::compiler
