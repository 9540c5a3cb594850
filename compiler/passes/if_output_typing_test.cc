// SPDX-License-Identifier: Apache-2.0
// If output typing: an If typed from the one branch that type-checks, and left alone otherwise.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::f32;

// y = If(c) then Relu(x) else <Squeeze(x, [-1]), which does not type-check for x of [1,4,2] and
// so keeps no static type>; `typed_else` gives the else branch a Neg(x) instead.
std::unique_ptr<Graph> if_graph(bool typed_else) {
  auto g = std::make_unique<Graph>("branches");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({1, 4, 2}));
  Value* c = b.input("c", TensorType(DType::kBool, Shape{}));
  auto then_branch = std::make_shared<Graph>("then", g.get());
  GraphBuilder tb(*then_branch);
  tb.output(tb.add(Op(ops::Relu{}), {x}, "relu"));
  auto else_branch = std::make_shared<Graph>("else", g.get());
  if (typed_else) {
    GraphBuilder eb(*else_branch);
    eb.output(eb.add(Op(ops::Neg{}), {x}, "neg"));
  } else {
    Value* axes = else_branch->add_constant(Tensor::from_vector(std::vector<int64_t>{-1}), "axes");
    Node* squeeze = else_branch->add_node(Op(ops::Squeeze{}), {x, axes}, 1, "squeeze");
    squeeze->output(0)->set_name("squeezed");
    else_branch->add_output(squeeze->output(0));
  }
  ops::If op;
  op.then_branch = then_branch;
  op.else_branch = else_branch;
  Node* node = g->add_node(Op(op), {c}, 1, "if");
  node->output(0)->set_name("y");
  g->add_output(node->output(0));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

TEST(IfOutputTyping, TakesTheTypesOfTheOnlyBranchThatTypeChecks) {
  std::unique_ptr<Graph> g = if_graph(/*typed_else=*/false);
  auto pass = make_if_output_typing();
  EXPECT_TRUE(testing::expect_rewrite(
      *g, *pass,
      "graph branches(%x: f32[1,4,2], %c: bool[]) {\n"
      "  %y: f32[*] = If[else_branch=<graph else>, then_branch=<graph then>](%c)  # \"if\"\n"
      "    graph else() {\n"
      "      %axes: i64[1] = Constant[value=i64[1]{-1}]()  # \"axes\"\n"
      "      %squeezed: f32[*] = Squeeze(%x, %axes)  # \"squeeze\"\n"
      "      return %squeezed\n"
      "    }\n"
      "    graph then() {\n"
      "      %relu: f32[1,4,2] = Relu(%x)  # \"relu\"\n"
      "      return %relu\n"
      "    }\n"
      "  return %y\n"
      "}\n",
      "graph branches(%x: f32[1,4,2], %c: bool[]) {\n"
      "  %y: f32[1,4,2] = If[else_branch=<graph else>, then_branch=<graph then>](%c)  # \"if\"\n"
      "    graph else() {\n"
      "      %axes: i64[1] = Constant[value=i64[1]{-1}]()  # \"axes\"\n"
      "      %squeezed: f32[*] = Squeeze(%x, %axes)  # \"squeeze\"\n"
      "      return %squeezed\n"
      "    }\n"
      "    graph then() {\n"
      "      %relu: f32[1,4,2] = Relu(%x)  # \"relu\"\n"
      "      return %relu\n"
      "    }\n"
      "  return %y\n"
      "}\n"));
  // Once typed, nothing more to do.
  Result<bool> again = pass->run(*g);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(IfOutputTyping, LeavesAnIfWhoseBranchesBothTypeCheck) {
  std::unique_ptr<Graph> g = if_graph(/*typed_else=*/true);
  // Its output type is what inference (of the builder-less If node) left: unknown, like the
  // importer's for branches that differ; both branches are typed, so nothing picks one.
  Result<bool> changed = make_if_output_typing()->run(*g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_FALSE(g->outputs()[0]->tensor_type().is_static());
}

}  // namespace
}  // namespace kiln::compiler
