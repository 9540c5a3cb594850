// SPDX-License-Identifier: Apache-2.0
// Deep copies of graphs, for passes that must run a variant of a graph (calibration).
#include "compiler/ir/clone.h"

namespace kiln::compiler {

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

void copy_into(const Graph& from, Graph& to, ValueMap& values);

// Replaces every subgraph attribute of an op by a copy made inside `parent`.
class SubgraphCopier final : public AttrVisitor {
 public:
  SubgraphCopier(Graph& parent, ValueMap& values) : parent_(parent), values_(values) {}
  void visit(std::string_view, AttrRef field) override {
    auto* sub = std::get_if<GraphAttr*>(&field);
    if (sub == nullptr || **sub == nullptr) return;
    auto copy = std::make_shared<Graph>((**sub)->name(), &parent_);
    copy_into(***sub, *copy, values_);
    **sub = std::move(copy);
  }

 private:
  Graph& parent_;
  ValueMap& values_;
};

void copy_into(const Graph& from, Graph& to, ValueMap& values) {
  for (const Value* in : from.inputs()) values[in] = to.add_input(in->name(), in->type());
  for (const auto& node : from.nodes()) {
    std::vector<Value*> inputs;
    inputs.reserve(node->inputs().size());
    for (const Value* in : node->inputs())
      inputs.push_back(in == nullptr ? nullptr : values.at(in));
    Op op = node->op();
    if (!op.subgraphs().empty()) {
      SubgraphCopier copier(to, values);
      op = op.with_attributes(copier);
    }
    Node* copy = to.add_node(std::move(op), std::move(inputs), node->num_outputs(), node->name());
    for (int i = 0; i < node->num_outputs(); ++i) {
      copy->output(i)->set_name(node->output(i)->name());
      copy->output(i)->set_type(node->output(i)->type());
      values[node->output(i)] = copy->output(i);
    }
  }
  for (const Value* out : from.outputs()) to.add_output(values.at(out));
}

}  // namespace

std::shared_ptr<Graph> clone_graph(const Graph& graph, ValueMap* values) {
  auto copy = std::make_shared<Graph>(graph.name(), graph.parent());
  ValueMap local;
  copy_into(graph, *copy, values != nullptr ? *values : local);
  return copy;
}

}  // namespace kiln::compiler
