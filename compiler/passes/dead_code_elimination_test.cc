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

}  // namespace
}  // namespace kiln::compiler
