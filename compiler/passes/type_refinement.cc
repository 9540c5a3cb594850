// SPDX-License-Identifier: Apache-2.0
// Type refinement: re-infers value types after rewrites made more of them computable (a Reshape
// whose shape input was folded into a constant gets its static output shape), folding again
// what the sharper types make constant (If nodes whose condition became one included).
#include "compiler/ops/infer.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {

namespace {

// Re-infers every node in order; a type is replaced only by a more specific one (static where
// it was not), so imported hints are never lost. `in_branch`: `graph` is (inside) an If branch,
// where a node that does not type-check keeps its types: exporters write Python's
// `if x.shape[-1] == 1: x = x.squeeze(-1)` as an If whose then-branch fails for other shapes,
// so such an error is left to the kernel, raised only if the branch runs.
Result<bool> refine(Graph& graph, bool in_branch) {
  bool changed = false;
  for (auto& node : graph.nodes()) {
    for (Graph* sub : node->op().subgraphs()) {
      KILN_ASSIGN_OR_RETURN(bool sub_changed,
                            refine(*sub, in_branch || node->kind() == OpKind::kIf));
      changed |= sub_changed;
    }
    std::vector<ValueType> before;
    bool all_static = true;
    for (const Value* v : node->outputs()) {
      before.push_back(v->type());
      all_static &= v->type().is_tensor() && v->tensor_type().is_static();
    }
    if (all_static) continue;
    Status inferred = infer_node(*node);
    if (!inferred.ok()) {
      if (!in_branch) return inferred;
      for (int i = 0; i < node->num_outputs(); ++i)
        node->output(i)->set_type(before[static_cast<size_t>(i)]);
      continue;
    }
    for (int i = 0; i < node->num_outputs(); ++i) {
      Value* v = node->output(i);
      const ValueType& old = before[static_cast<size_t>(i)];
      const bool sharper = v->type().is_tensor() && v->tensor_type().is_static() &&
                           !(old.is_tensor() && old.tensor().is_static());
      if (sharper) {
        changed = true;
      } else {
        v->set_type(old);
      }
    }
  }
  return changed;
}

// Refining and folding alternate to a fixpoint: a refined type lets Shape fold, which lets the
// next Reshape be refined (one round per layer of a transformer).
class TypeRefinement final : public Pass {
 public:
  std::string_view name() const override { return "type_refinement"; }
  Result<bool> run(Graph& graph) override {
    std::unique_ptr<Pass> fold = make_constant_folding();
    std::unique_ptr<Pass> fold_ifs = make_if_folding();
    bool changed = false;
    for (int round = 0; round < kMaxRounds; ++round) {
      KILN_ASSIGN_OR_RETURN(bool refined, refine(graph, /*in_branch=*/false));
      if (!refined) break;
      changed = true;
      KILN_ASSIGN_OR_RETURN(bool folded, fold->run(graph));
      KILN_ASSIGN_OR_RETURN(bool ifs_folded, fold_ifs->run(graph));
      if (!folded && !ifs_folded) break;
    }
    return changed;
  }

 private:
  static constexpr int kMaxRounds = 256;
};

}  // namespace

std::unique_ptr<Pass> make_type_refinement() {
  return std::make_unique<TypeRefinement>();
}

}  // namespace kiln::compiler
