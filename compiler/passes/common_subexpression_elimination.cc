// SPDX-License-Identifier: Apache-2.0
// Common-subexpression elimination: a node equal to an earlier one (same op, attributes and
// inputs) is replaced by it.
#include <unordered_map>

#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

bool is_random(const Node& node) {
  switch (node.kind()) {
    case OpKind::kBernoulli:
    case OpKind::kRandomUniform:
    case OpKind::kRandomUniformLike:
    case OpKind::kRandomNormal:
    case OpKind::kRandomNormalLike:
    case OpKind::kMultinomial: return true;
    default: return false;
  }
}

size_t node_hash(const Node& node) {
  size_t h = node.op().hash();
  for (const Value* in : node.inputs()) h = h * 31 + std::hash<const Value*>()(in);
  return h * 31 + static_cast<size_t>(node.num_outputs());
}

bool same_node(const Node& a, const Node& b) {
  return a.inputs() == b.inputs() && a.num_outputs() == b.num_outputs() && a.op() == b.op();
}

class CommonSubexpressionElimination final : public Pass {
 public:
  std::string_view name() const override { return "common_subexpression_elimination"; }

  Result<bool> run(Graph& graph) override {
    bool changed = false;
    std::unordered_multimap<size_t, Node*> seen;
    std::vector<Node*> order;
    for (auto& node : graph.nodes()) order.push_back(node.get());
    for (Node* node : order) {
      for (Graph* sub : node->op().subgraphs()) {
        KILN_ASSIGN_OR_RETURN(bool sub_changed, run(*sub));
        changed |= sub_changed;
      }
      if (is_random(*node) || !node->op().subgraphs().empty()) continue;
      size_t h = node_hash(*node);
      Node* twin = nullptr;
      auto [begin, end] = seen.equal_range(h);
      for (auto it = begin; it != end && twin == nullptr; ++it) {
        if (same_node(*it->second, *node)) twin = it->second;
      }
      if (twin == nullptr) {
        seen.emplace(h, node);
        continue;
      }
      bool replaced_all = true;
      for (int i = 0; i < node->num_outputs(); ++i) {
        if (node->output(i)->uses().empty() && !is_graph_output(node->output(i))) continue;
        bool forwarded = forward_output(node, i, twin->output(i));
        replaced_all &= forwarded;
        changed |= forwarded;
      }
      if (replaced_all) {
        bool dead = true;
        for (const Value* out : node->outputs())
          dead &= out->uses().empty() && !is_graph_output(out);
        if (dead) graph.erase(node);
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_common_subexpression_elimination() {
  return std::make_unique<CommonSubexpressionElimination>();
}

}  // namespace kiln::compiler
