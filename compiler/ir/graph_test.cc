// SPDX-License-Identifier: Apache-2.0
// Tests of graph editing, the verifier and the printer.
#include "compiler/ir/graph.h"

#include <gtest/gtest.h>

#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler {
namespace {

TEST(Graph, UseListsFollowEdits) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::kF32, Shape{2, 3}));
  Value* y = g.add_input("y", TensorType(DType::kF32, Shape{2, 3}));
  Node* add = g.add_node(Op(ops::Add{}), {x, y}, 1, "add");
  Node* relu = g.add_node(Op(ops::Relu{}), {add->output(0)}, 1, "relu");
  g.add_output(relu->output(0));

  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].node, add);
  EXPECT_EQ(add->output(0)->uses()[0].node, relu);

  relu->set_input(0, y);
  EXPECT_TRUE(add->output(0)->uses().empty());
  ASSERT_EQ(y->uses().size(), 2u);
  g.erase(add);
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(y->uses().size(), 1u);
  EXPECT_TRUE(verify_graph(g).ok());
}

TEST(Graph, ReplaceAllUsesRewiresNodesAndOutputs) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::kF32, Shape{4}));
  Node* a = g.add_node(Op(ops::Relu{}), {x}, 1, "a");
  Node* b = g.add_node(Op(ops::Neg{}), {a->output(0)}, 1, "b");
  g.add_output(a->output(0));
  g.replace_all_uses(a->output(0), x);
  EXPECT_EQ(b->input(0), x);
  EXPECT_EQ(g.outputs()[0], x);
  EXPECT_TRUE(a->output(0)->uses().empty());
}

TEST(Graph, VerifierCatchesUseBeforeDefinition) {
  Graph g;
  Value* x = g.add_input("x", TensorType(DType::kF32, Shape{4}));
  Node* a = g.add_node(Op(ops::Relu{}), {x}, 1, "a");
  Node* b = g.add_node(Op(ops::Neg{}), {x}, 1, "b", /*before=*/a);
  b->set_input(0, a->output(0));  // b now sits before the node that defines its input
  g.add_output(b->output(0));
  Status s = verify_graph(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("used before it is defined"), std::string::npos) << s.message();
}

TEST(Graph, PrinterShowsTypesAttributesAndNames) {
  Graph g("net");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("N"), 3}));
  ops::LeakyRelu lrelu;
  lrelu.alpha = 0.5f;
  Value* y = b.add(Op(lrelu), {x}, "act");
  b.output(y);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  EXPECT_EQ(print_graph(g),
            "graph net(%x: f32[N,3]) {\n"
            "  %act: f32[N,3] = LeakyRelu[alpha=0.5](%x)  # \"act\"\n"
            "  return %act\n"
            "}\n");
  std::string dot = print_graph_dot(g);
  EXPECT_NE(dot.find("digraph \"net\""), std::string::npos);
  EXPECT_NE(dot.find("LeakyRelu"), std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler
