// SPDX-License-Identifier: Apache-2.0
// The IR: a Graph owns Nodes (in topological order) and the Values they produce and consume.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/ir/types.h"
#include "compiler/ops/op.h"

namespace kiln::compiler {

class Graph;
class Node;

// One use of a value: input `index` of `node`.
struct Use {
  Node* node;
  int index;
  friend bool operator==(const Use& a, const Use& b) { return a.node == b.node && a.index == b.index; }
};

// An SSA value: a graph input, or output `index` of its producer node. Subgraph nodes may use values
// of enclosing graphs directly (ONNX outer-scope references).
class Value {
 public:
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const ValueType& type() const { return type_; }
  void set_type(ValueType type) { type_ = std::move(type); }
  // Shorthand for type().tensor().
  const TensorType& tensor_type() const { return type_.tensor(); }

  // The node that produces this value; nullptr for graph inputs.
  Node* producer() const { return producer_; }
  int producer_index() const { return producer_index_; }
  Graph* graph() const { return graph_; }
  const std::vector<Use>& uses() const { return uses_; }

  // The constant this value holds when its producer is a Constant node; nullptr otherwise.
  const Tensor* constant_value() const;

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  ValueType type_;
  Node* producer_ = nullptr;
  int producer_index_ = 0;
  Graph* graph_ = nullptr;
  std::vector<Use> uses_;
};

// One operation. Inputs may be nullptr for omitted optional inputs. `name` is the ONNX node name;
// it travels with the node through every rewrite so errors can name the model node.
class Node {
 public:
  const Op& op() const { return op_; }
  OpKind kind() const { return op_.kind(); }
  void set_op(Op op) { op_ = std::move(op); }
  template <class T>
  const T& attrs() const {
    return op_.as<T>();
  }

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  Value* input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  Value* output(int i) const { return outputs_[static_cast<size_t>(i)]; }
  // True when input i exists and is not omitted.
  bool has_input(int i) const { return i < num_inputs() && inputs_[static_cast<size_t>(i)] != nullptr; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }

  // Rewires input i to `value` (may be nullptr), updating use lists.
  void set_input(int i, Value* value);
  void add_input(Value* value);
  // Removes trailing inputs beyond `count`.
  void truncate_inputs(int count);

  Graph* graph() const { return graph_; }
  // `Conv "resnet/conv1"`: how errors name a node.
  std::string describe() const;

 private:
  friend class Graph;
  Op op_;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  Graph* graph_ = nullptr;
};

class Graph {
 public:
  using NodeList = std::list<std::unique_ptr<Node>>;

  explicit Graph(std::string name = "main", Graph* parent = nullptr)
      : name_(std::move(name)), parent_(parent) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  // The enclosing graph of a subgraph; nullptr for the main graph.
  Graph* parent() const { return parent_; }
  void set_parent(Graph* parent) { parent_ = parent; }

  Value* add_input(std::string name, ValueType type);
  const std::vector<Value*>& inputs() const { return inputs_; }
  void add_output(Value* value) { outputs_.push_back(value); }
  void set_output(int i, Value* value) { outputs_[static_cast<size_t>(i)] = value; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void clear_outputs() { outputs_.clear(); }

  // Adds a node before `before` (nullptr: at the end) with `num_outputs` fresh outputs. Output
  // types start as f32 of unknown rank; set them (or run infer_types) afterwards.
  Node* add_node(Op op, std::vector<Value*> inputs, int num_outputs, std::string name = "",
                 Node* before = nullptr);
  // A Constant node holding `value`, returning its output; `name` names both the node and value.
  Value* add_constant(Tensor value, std::string name = "", Node* before = nullptr);

  // Every use of `from` (in this graph, its subgraphs and its outputs) now uses `to`.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node whose outputs have no uses (checked).
  void erase(Node* node);

  // Nodes in order; iteration is stable while nodes are added or erased elsewhere.
  NodeList& nodes() { return nodes_; }
  const NodeList& nodes() const { return nodes_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  // A fresh name: `hint` the first time it is asked for, then "<hint>_1", "<hint>_2", ...
  std::string unique_name(std::string_view hint);

 private:
  Value* new_value(std::string name);

  std::string name_;
  Graph* parent_;
  NodeList nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::unordered_map<std::string, int64_t> name_counts_;
};

}  // namespace kiln::compiler
