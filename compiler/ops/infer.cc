// SPDX-License-Identifier: Apache-2.0
// The inference dispatch and the graph-wide inference walk.
#include "compiler/ops/infer.h"

#include "compiler/ops/all_ops.h"

namespace kiln::compiler {

const ValueType& InferContext::input_type(int i) const {
  KILN_CHECK(has_input(i), "InferContext::input_type of a missing input");
  return *types_[static_cast<size_t>(i)];
}

const TensorType& InferContext::input(int i) const { return input_type(i).tensor(); }

Status InferContext::error(std::string_view message) const {
  return invalid_argument_error(fmt::format("{}: {}", node_.describe(), message));
}

Status InferContext::require_input(int i, int rank) const {
  if (!has_input(i)) return errorf("input {} is required", i);
  if (!input_type(i).is_tensor()) {
    return errorf("input {} must be a tensor, got {}", i, input_type(i).to_string());
  }
  if (rank >= 0 && input(i).has_rank() && input(i).rank() != rank) {
    return errorf("input {} must have rank {}, got {}", i, rank, input(i).to_string());
  }
  return Status();
}

InferResult infer_types(const Op& op, const InferContext& ctx) {
  switch (op.kind()) {
#define KILN_OP(name, family) \
  case OpKind::k##name: return infer_op(op.as<ops::name>(), ctx);
#include "compiler/ops/op_list.inc"
#undef KILN_OP
  }
  return internal_error("infer_types: invalid op kind");
}

Status infer_node(Node& node) {
  std::vector<const ValueType*> types;
  std::vector<const Tensor*> values;
  types.reserve(static_cast<size_t>(node.num_inputs()));
  for (Value* v : node.inputs()) {
    types.push_back(v ? &v->type() : nullptr);
    values.push_back(v ? v->constant_value() : nullptr);
  }
  InferContext ctx(node, std::move(types), std::move(values));
  KILN_ASSIGN_OR_RETURN(std::vector<ValueType> out, infer_types(node.op(), ctx));
  if (static_cast<int>(out.size()) < node.num_outputs()) {
    return internal_error(fmt::format("{}: inference gave {} output types for {} outputs",
                                      node.describe(), out.size(), node.num_outputs()));
  }
  for (int i = 0; i < node.num_outputs(); ++i) node.output(i)->set_type(std::move(out[static_cast<size_t>(i)]));
  return Status();
}

Status infer_graph(Graph& graph) {
  for (auto& node : graph.nodes()) {
    for (Graph* sub : node->op().subgraphs()) KILN_RETURN_IF_ERROR(infer_graph(*sub));
    KILN_RETURN_IF_ERROR(infer_node(*node));
  }
  return Status();
}

}  // namespace kiln::compiler
