// SPDX-License-Identifier: Apache-2.0
#include "compiler/runtime/shape_profiles.h"

#include <fmt/format.h>

#include <unordered_map>

#include "compiler/ops/infer.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {

namespace {

// "1x3x224x224;1x10" for the tensors of `inputs`.
std::string shape_key(const std::vector<Argument>& inputs) {
  std::string key;
  for (const Argument& a : inputs) {
    if (!key.empty()) key += ';';
    key += a.tensor().shape().to_string();
  }
  return key;
}

}  // namespace

bool can_specialize(const Graph& graph) {
  bool dynamic = false;
  for (const Value* v : graph.inputs()) {
    if (!v->type().is_tensor()) return false;
    dynamic |= !v->tensor_type().is_static();
  }
  if (!dynamic) return false;
  for (const auto& node : graph.nodes()) {
    if (!node->op().subgraphs().empty()) return false;
  }
  return true;
}

Result<std::shared_ptr<Graph>> specialize_graph(const Graph& graph,
                                                const std::vector<Argument>& inputs) {
  if (inputs.size() != graph.inputs().size()) {
    return invalid_argument_error(fmt::format("graph \"{}\" takes {} inputs, {} given",
                                              graph.name(), graph.inputs().size(), inputs.size()));
  }
  auto copy = std::make_shared<Graph>(graph.name());
  std::unordered_map<const Value*, Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    if (!inputs[i].is_tensor()) {
      return invalid_argument_error(
          fmt::format("input \"{}\" of graph \"{}\" is not a tensor", v->name(), graph.name()));
    }
    const Tensor& t = inputs[i].tensor();
    values[v] = copy->add_input(v->name(), ValueType(TensorType(t.dtype(), t.shape())));
  }
  for (const auto& node : graph.nodes()) {
    std::vector<Value*> in;
    for (const Value* v : node->inputs()) {
      if (v == nullptr) {
        in.push_back(nullptr);
        continue;
      }
      auto it = values.find(v);
      if (it == values.end()) {
        return internal_error(fmt::format("{} reads \"{}\", which is defined outside the graph",
                                          node->describe(), v->name()));
      }
      in.push_back(it->second);
    }
    Node* n = copy->add_node(node->op(), std::move(in), node->num_outputs(), node->name());
    for (int i = 0; i < node->num_outputs(); ++i) {
      n->output(i)->set_name(node->output(i)->name());
      n->output(i)->set_type(node->output(i)->type());
      values[node->output(i)] = n->output(i);
    }
    KILN_RETURN_IF_ERROR(infer_node(*n).with_context(fmt::format(
        "specializing graph \"{}\" to input shapes {}", graph.name(), shape_key(inputs))));
  }
  for (const Value* v : graph.outputs()) copy->add_output(values.at(v));
  return copy;
}

Result<std::shared_ptr<Executable>> ShapeProfiles::get(const std::vector<Argument>& inputs) const {
  const std::string key = shape_key(inputs);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().executable;
    }
  }
  // Compiled outside the lock: other shapes keep running meanwhile.
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, specialize_graph(graph_, inputs));
  Result<std::shared_ptr<Executable>> compiled = compile_(std::move(graph));
  if (!compiled.ok()) {
    return compiled.status().with_context(fmt::format("compiling the shape profile {}", key));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++compilations_;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key) return it->executable;  // another caller compiled it first
  }
  entries_.push_front({key, *compiled});
  if (entries_.size() > capacity_) entries_.pop_back();
  return std::move(compiled).value();
}

size_t ShapeProfiles::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t ShapeProfiles::compilations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compilations_;
}

}  // namespace kiln::compiler
