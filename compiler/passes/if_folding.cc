// SPDX-License-Identifier: Apache-2.0
// If folding: an If whose condition is a constant is replaced by the nodes of the branch it takes,
// so the other branch (which may not even type-check for these shapes) is gone.
#include <unordered_map>
#include <unordered_set>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

// Points every reference to a key of `map` in `graph` (and its subgraphs) at the mapped value.
void remap(Graph& graph, const ValueMap& map) {
  for (auto& node : graph.nodes()) {
    for (int i = 0; i < node->num_inputs(); ++i) {
      auto it = map.find(node->input(i));
      if (node->input(i) != nullptr && it != map.end()) node->set_input(i, it->second);
    }
    for (Graph* sub : node->op().subgraphs()) remap(*sub, map);
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    auto it = map.find(graph.outputs()[i]);
    if (it != map.end()) graph.set_output(static_cast<int>(i), it->second);
  }
}

// Drops every input of every node of `graph` (and, with `deep`, of its subgraphs), so that values
// outside it no longer list its nodes as users once it is destroyed.
void detach(Graph& graph, bool deep) {
  for (auto& node : graph.nodes()) {
    for (int i = 0; i < node->num_inputs(); ++i) node->set_input(i, nullptr);
    if (!deep) continue;
    for (Graph* sub : node->op().subgraphs()) detach(*sub, true);
  }
}

// Copies the nodes of `branch` into `graph` before `at`, in order, and returns the values that
// stand for the branch's outputs. The copies share the branch nodes' ops: subgraphs of those ops
// move to `graph` and their references into the branch are remapped.
std::vector<Value*> inline_branch(Graph& graph, Graph& branch, Node* at, ValueMap& map) {
  auto mapped = [&](Value* v) {
    auto it = map.find(v);
    return it == map.end() ? v : it->second;
  };
  for (auto& node : branch.nodes()) {
    std::vector<Value*> inputs;
    for (Value* in : node->inputs()) inputs.push_back(in == nullptr ? nullptr : mapped(in));
    Node* copy =
        graph.add_node(node->op(), std::move(inputs), node->num_outputs(), node->name(), at);
    for (int i = 0; i < node->num_outputs(); ++i) {
      copy->output(i)->set_name(node->output(i)->name());
      copy->output(i)->set_type(node->output(i)->type());
      map[node->output(i)] = copy->output(i);
    }
    for (Graph* sub : copy->op().subgraphs()) {
      sub->set_parent(&graph);
      remap(*sub, map);
    }
  }
  std::vector<Value*> outs;
  for (Value* out : branch.outputs()) outs.push_back(mapped(out));
  return outs;
}

bool is_output(const Graph& graph, const Value* v) {
  for (const Value* out : graph.outputs()) {
    if (out == v) return true;
  }
  return false;
}

bool fold(Graph& graph) {
  bool changed = false;
  std::vector<Node*> order;
  for (auto& node : graph.nodes()) order.push_back(node.get());
  for (Node* node : order) {
    for (Graph* sub : node->op().subgraphs()) {
      changed |= fold(*sub);
    }
    if (node->kind() != OpKind::kIf || !node->has_input(0)) continue;
    const Tensor* cond = node->input(0)->constant_value();
    if (cond == nullptr || cond->dtype() != DType::kBool || cond->numel() != 1) continue;
    const auto& op = node->attrs<ops::If>();
    Graph& taken = cond->data<bool>()[0] ? *op.then_branch : *op.else_branch;
    Graph& dropped = cond->data<bool>()[0] ? *op.else_branch : *op.then_branch;
    ValueMap map;
    std::vector<Value*> outs = inline_branch(graph, taken, node, map);
    // The values the copies produce, which may be renamed; others (outer values the branch
    // returns) may not.
    std::unordered_set<const Value*> copies;
    for (const auto& [original, copy] : map) copies.insert(copy);
    for (int i = 0; i < node->num_outputs(); ++i) {
      Value* from = node->output(i);
      Value* to = outs[static_cast<size_t>(i)];
      if (is_output(graph, from)) {
        // A graph output keeps its name, through an Identity when the value already has one.
        if (copies.count(to) == 0 || is_output(graph, to)) {
          Node* id = graph.add_node(Op(ops::Identity{}), {to}, 1, node->name(), node);
          id->output(0)->set_type(from->type());
          to = id->output(0);
        }
        to->set_name(from->name());
      }
      graph.replace_all_uses(from, to);
    }
    detach(taken, /*deep=*/false);
    detach(dropped, /*deep=*/true);
    graph.erase(node);
    changed = true;
  }
  return changed;
}

class IfFolding final : public Pass {
 public:
  std::string_view name() const override { return "if_folding"; }
  Result<bool> run(Graph& graph) override { return fold(graph); }
};

}  // namespace

std::unique_ptr<Pass> make_if_folding() {
  return std::make_unique<IfFolding>();
}

}  // namespace kiln::compiler
