// SPDX-License-Identifier: Apache-2.0
// Graph editing: nodes, values, use lists.
#include "compiler/ir/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/ops/shape.h"

namespace kiln::compiler {

const Tensor* Value::constant_value() const {
  if (producer_ == nullptr) return nullptr;
  if (const auto* c = producer_->op().get_if<ops::Constant>(); c && c->value.defined()) {
    return &c->value;
  }
  return nullptr;
}

void Node::set_input(int i, Value* value) {
  Value*& slot = inputs_[static_cast<size_t>(i)];
  if (slot != nullptr) {
    auto& uses = slot->uses_;
    auto it = std::find(uses.begin(), uses.end(), Use{this, i});
    KILN_CHECK(it != uses.end(), "use list out of sync");
    uses.erase(it);
  }
  slot = value;
  if (value != nullptr) value->uses_.push_back(Use{this, i});
}

void Node::add_input(Value* value) {
  inputs_.push_back(nullptr);
  set_input(num_inputs() - 1, value);
}

void Node::truncate_inputs(int count) {
  while (num_inputs() > count) {
    set_input(num_inputs() - 1, nullptr);
    inputs_.pop_back();
  }
}

std::string Node::describe() const {
  return name_.empty() ? fmt::format("{} (unnamed)", op_.name())
                       : fmt::format("{} \"{}\"", op_.name(), name_);
}

Value* Graph::new_value(std::string name) {
  auto v = std::make_unique<Value>();
  v->name_ = std::move(name);
  v->graph_ = this;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::add_input(std::string name, ValueType type) {
  Value* v = new_value(std::move(name));
  v->type_ = std::move(type);
  inputs_.push_back(v);
  return v;
}

std::string Graph::unique_name(std::string_view hint) {
  std::string base(hint.empty() ? "v" : hint);
  int64_t n = name_counts_[base]++;
  return n == 0 ? base : fmt::format("{}_{}", base, n);
}

Node* Graph::add_node(Op op, std::vector<Value*> inputs, int num_outputs, std::string name,
                      Node* before) {
  auto owned = std::make_unique<Node>();
  Node* node = owned.get();
  node->op_ = std::move(op);
  node->name_ = std::move(name);
  node->graph_ = this;
  node->inputs_.resize(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) node->set_input(static_cast<int>(i), inputs[i]);
  for (int i = 0; i < num_outputs; ++i) {
    Value* v = new_value(unique_name(node->name_.empty() ? node->op_.name() : node->name_));
    v->producer_ = node;
    v->producer_index_ = i;
    v->type_ = TensorType::unranked(DType::kF32);
    node->outputs_.push_back(v);
  }
  auto pos = nodes_.end();
  if (before != nullptr) {
    pos = std::find_if(nodes_.begin(), nodes_.end(),
                       [&](const std::unique_ptr<Node>& n) { return n.get() == before; });
    KILN_CHECK(pos != nodes_.end(), "add_node: `before` is not in this graph");
  }
  nodes_.insert(pos, std::move(owned));
  return node;
}

Value* Graph::add_constant(Tensor value, std::string name, Node* before) {
  TensorType type(value.dtype(), value.shape());
  ops::Constant c;
  c.value = std::move(value);
  Node* node = add_node(Op(std::move(c)), {}, 1, name, before);
  if (!name.empty()) node->output(0)->set_name(std::move(name));
  node->output(0)->set_type(std::move(type));
  return node->output(0);
}

namespace {
void replace_outputs(Graph& g, Value* from, Value* to) {
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (g.outputs()[i] == from) g.set_output(static_cast<int>(i), to);
  }
  for (auto& node : g.nodes()) {
    for (Graph* sub : node->op().subgraphs()) replace_outputs(*sub, from, to);
  }
}
}  // namespace

void Graph::replace_all_uses(Value* from, Value* to) {
  KILN_CHECK(from != to, "replace_all_uses with itself");
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.node->set_input(u.index, to);
  replace_outputs(*this, from, to);
}

void Graph::erase(Node* node) {
  for (Value* out : node->outputs_) {
    KILN_CHECK(out->uses_.empty(), "erase: " + node->describe() + " still has uses");
    bool is_output = std::find(outputs_.begin(), outputs_.end(), out) != outputs_.end();
    KILN_CHECK(!is_output, "erase: " + node->describe() + " produces a graph output");
  }
  for (int i = 0; i < node->num_inputs(); ++i) node->set_input(i, nullptr);
  auto it = std::find_if(nodes_.begin(), nodes_.end(),
                         [&](const std::unique_ptr<Node>& n) { return n.get() == node; });
  KILN_CHECK(it != nodes_.end(), "erase: node is not in this graph");
  for (Value* out : node->outputs_) out->producer_ = nullptr;
  nodes_.erase(it);
}

}  // namespace kiln::compiler
