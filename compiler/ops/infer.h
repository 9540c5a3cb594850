// SPDX-License-Identifier: Apache-2.0
// Type and shape inference: one function per op, given input types and any known input values.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/types.h"
#include "core/status.h"
#include "core/tensor.h"

namespace kiln::compiler {

// What an op's inference sees: its node (for attributes and error messages), the types of its
// inputs, and the values of inputs that are known (constants at compile time; every input when
// the ref target runs, so inference there yields concrete shapes).
class InferContext {
 public:
  InferContext(const Node& node, std::vector<const ValueType*> types,
               std::vector<const Tensor*> values)
      : node_(node), types_(std::move(types)), values_(std::move(values)) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(types_.size()); }
  int num_outputs() const { return node_.num_outputs(); }
  // Input i exists and is not an omitted optional input.
  bool has_input(int i) const {
    return i >= 0 && i < num_inputs() && types_[static_cast<size_t>(i)] != nullptr;
  }
  const ValueType& input_type(int i) const;
  // The tensor type of input i (checked: present and a tensor).
  const TensorType& input(int i) const;
  // The value of input i when known, else nullptr.
  const Tensor* input_value(int i) const {
    return has_input(i) ? values_[static_cast<size_t>(i)] : nullptr;
  }

  // An invalid-argument error that names the node: `Conv "c1": <message>`.
  Status error(std::string_view message) const;
  template <class... Args>
  Status errorf(fmt::format_string<Args...> format, Args&&... args) const {
    return error(fmt::format(format, std::forward<Args>(args)...));
  }
  // Fails unless input i is present and a tensor of known rank `rank` (rank < 0: any rank).
  Status require_input(int i, int rank = -1) const;

 private:
  const Node& node_;
  std::vector<const ValueType*> types_;
  std::vector<const Tensor*> values_;
};

using InferResult = Result<std::vector<ValueType>>;

// The per-op inference, specialised in ops/<family>.cc for each op of the family.
template <class T>
InferResult infer_op(const T& op, const InferContext& ctx);

// Dispatches to infer_op<T> for the op's kind.
InferResult infer_types(const Op& op, const InferContext& ctx);

// Infers `node`'s output types from its inputs' types and constant values and stores them.
Status infer_node(Node& node);
// Infers every node of `graph` (and of its subgraphs) in order.
Status infer_graph(Graph& graph);

}  // namespace kiln::compiler
