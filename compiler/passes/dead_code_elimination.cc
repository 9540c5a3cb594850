// SPDX-License-Identifier: Apache-2.0
// Dead-code elimination: removes nodes none of whose outputs are used or returned.
#include <algorithm>

#include "compiler/passes/passes.h"

namespace kiln::compiler {

namespace {

bool is_output(const Graph& graph, const Value* v) {
  return std::find(graph.outputs().begin(), graph.outputs().end(), v) != graph.outputs().end();
}

// Drops the inputs of every node in `graph` and its subgraphs: a subgraph dies with the node that
// holds it, and values outside it must not keep it among their users.
void release_inputs(Graph& graph) {
  for (auto& node : graph.nodes()) {
    for (int i = 0; i < node->num_inputs(); ++i) node->set_input(i, nullptr);
    for (Graph* sub : node->op().subgraphs()) release_inputs(*sub);
  }
}

// One sweep from the back removes whole dead chains: a node's users are erased before it is seen.
bool erase_dead(Graph& graph) {
  std::vector<Node*> order;
  for (auto& node : graph.nodes()) order.push_back(node.get());
  bool changed = false;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    for (Graph* sub : node->op().subgraphs()) changed |= erase_dead(*sub);
    bool used = std::any_of(node->outputs().begin(), node->outputs().end(), [&](const Value* v) {
      return !v->uses().empty() || is_output(graph, v);
    });
    if (!used) {
      for (Graph* sub : node->op().subgraphs()) release_inputs(*sub);
      graph.erase(node);
      changed = true;
    }
  }
  return changed;
}

class DeadCodeElimination final : public Pass {
 public:
  std::string_view name() const override { return "dead_code_elimination"; }
  Result<bool> run(Graph& graph) override { return erase_dead(graph); }
};

}  // namespace

std::unique_ptr<Pass> make_dead_code_elimination() { return std::make_unique<DeadCodeElimination>(); }

}  // namespace kiln::compiler
