// SPDX-License-Identifier: Apache-2.0
// If output typing: an If whose outputs have no static types because one branch does not type-check
// for the shapes given takes the types of the branch that does (Silero VAD v5's If on the sample
// rate: its 8 kHz branch cannot take a 16 kHz window of 576 samples, whose LSTM input becomes
// rank 5). A target can then plan the If, and run the other branch where types are found at run
// time should the condition ever pick it (the cpu target: on its interpreter).
#include "compiler/passes/passes.h"

namespace kiln::compiler {

namespace {

bool is_static(const Value* v) {
  return v->type().is_tensor() && v->tensor_type().is_static();
}

// Whether every value of `graph` (and of the graphs in it) and every output has a static type.
bool fully_typed(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    for (const Value* v : node->outputs()) {
      if (!is_static(v)) return false;
    }
    for (const Graph* sub : node->op().subgraphs()) {
      if (!fully_typed(*sub)) return false;
    }
  }
  for (const Value* v : graph.outputs()) {
    if (!is_static(v)) return false;
  }
  return true;
}

// Whether the types `node` declares (where it has them: dtype, rank) agree with `branch`'s outputs.
bool agrees(const Node& node, const Graph& branch) {
  for (int i = 0; i < node.num_outputs(); ++i) {
    const ValueType& declared = node.output(i)->type();
    if (!declared.is_tensor()) continue;
    const TensorType& t = branch.outputs()[static_cast<size_t>(i)]->tensor_type();
    if (declared.tensor().dtype != t.dtype) return false;
    if (declared.tensor().has_rank() && declared.tensor().rank() != t.rank()) return false;
  }
  return true;
}

bool retype(Graph& graph) {
  bool changed = false;
  for (auto& node : graph.nodes()) {
    for (Graph* sub : node->op().subgraphs()) changed |= retype(*sub);
    if (node->kind() != OpKind::kIf) continue;
    bool all_static = true;
    for (const Value* v : node->outputs()) all_static &= is_static(v);
    if (all_static) continue;
    const std::vector<Graph*> branches = node->op().subgraphs();  // else, then
    if (branches.size() != 2) continue;
    const bool typed[2] = {fully_typed(*branches[0]), fully_typed(*branches[1])};
    if (typed[0] == typed[1]) continue;
    const Graph& from = typed[0] ? *branches[0] : *branches[1];
    if (from.outputs().size() != static_cast<size_t>(node->num_outputs())) continue;
    if (!agrees(*node, from)) continue;
    for (int i = 0; i < node->num_outputs(); ++i) {
      node->output(i)->set_type(from.outputs()[static_cast<size_t>(i)]->type());
    }
    changed = true;
  }
  return changed;
}

class IfOutputTyping final : public Pass {
 public:
  std::string_view name() const override { return "if_output_typing"; }
  Result<bool> run(Graph& graph) override { return retype(graph); }
};

}  // namespace

std::unique_ptr<Pass> make_if_output_typing() {
  return std::make_unique<IfOutputTyping>();
}

}  // namespace kiln::compiler
