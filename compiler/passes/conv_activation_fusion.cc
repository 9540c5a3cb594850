// SPDX-License-Identifier: Apache-2.0
// Conv-activation fusion: a Relu whose input is a Conv's sole use becomes the Conv's activation.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

// Relu(Conv(...)) with the Conv output used by nothing else  ==>  Conv[activation="Relu"](...).
Result<bool> fuse_relu(Graph& graph, Node* relu) {
  if (relu->kind() != OpKind::kRelu || !relu->has_input(0)) return false;
  Value* y = relu->input(0);
  Node* conv = y->producer();
  if (conv == nullptr || conv->kind() != OpKind::kConv || conv->graph() != &graph) return false;
  if (y->uses().size() != 1 || is_graph_output(y)) return false;
  ops::Conv attrs = conv->attrs<ops::Conv>();
  if (attrs.activation) return false;
  attrs.activation = "Relu";
  conv->set_op(Op(std::move(attrs)));
  if (replace_node(graph, relu, y)) return true;
  return internal_error(fmt::format("{}: could not forward the fused Relu", conv->describe()));
}

class ConvActivationFusion final : public Pass {
 public:
  std::string_view name() const override { return "conv_activation_fusion"; }
  Result<bool> run(Graph& graph) override { return rewrite_to_fixpoint(graph, {fuse_relu}); }
};

}  // namespace

std::unique_ptr<Pass> make_conv_activation_fusion() {
  return std::make_unique<ConvActivationFusion>();
}

}  // namespace kiln::compiler
