// SPDX-License-Identifier: Apache-2.0
// Shared rewrite helpers.
#include "compiler/passes/rewrite.h"

#include <algorithm>

namespace kiln::compiler {

bool is_graph_output(const Value* v) {
  const auto& outs = v->graph()->outputs();
  return std::find(outs.begin(), outs.end(), v) != outs.end();
}

bool is_constant_filled_with(const Value* v, double x) {
  const Tensor* t = v ? v->constant_value() : nullptr;
  if (t == nullptr || t->dtype() == DType::kString || t->dtype() == DType::kBool) return false;
  return visit_dtype(t->dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
      return false;
    } else {
      for (const T& e : t->span<T>()) {
        if (static_cast<double>(static_cast<float>(e)) != x) return false;
      }
      return true;
    }
  });
}

bool forward_output(Node* node, int index, Value* value) {
  Value* out = node->output(index);
  if (is_graph_output(out)) {
    const auto& ins = out->graph()->inputs();
    bool value_is_input = std::find(ins.begin(), ins.end(), value) != ins.end();
    // Returning a graph input directly would rename the output; keep the node instead.
    if (value_is_input || is_graph_output(value) || value->graph() != out->graph()) return false;
    // The value takes the output's name so the model's output names stay what users expect.
    std::string name = out->name();
    out->set_name(out->name() + "_replaced");
    value->set_name(name);
  }
  out->graph()->replace_all_uses(out, value);
  return true;
}

bool replace_node(Graph& graph, Node* node, Value* value) {
  if (!forward_output(node, 0, value)) return false;
  for (const Value* out : node->outputs()) {
    if (!out->uses().empty() || is_graph_output(out)) return true;
  }
  graph.erase(node);
  return true;
}

Result<bool> rewrite_to_fixpoint(Graph& graph, const std::vector<RewriteRule>& rules,
                                 int max_rounds) {
  bool changed_any = false;
  for (int round = 0; round < max_rounds; ++round) {
    bool changed = false;
    std::vector<Node*> order;
    for (auto& node : graph.nodes()) order.push_back(node.get());
    for (Node* node : order) {
      for (Graph* sub : node->op().subgraphs()) {
        KILN_ASSIGN_OR_RETURN(bool sub_changed, rewrite_to_fixpoint(*sub, rules, max_rounds));
        changed |= sub_changed;
      }
      for (const RewriteRule& rule : rules) {
        KILN_ASSIGN_OR_RETURN(bool fired, rule(graph, node));
        if (fired) {
          changed = true;
          break;
        }
      }
    }
    changed_any |= changed;
    if (!changed) break;
  }
  return changed_any;
}

}  // namespace kiln::compiler
