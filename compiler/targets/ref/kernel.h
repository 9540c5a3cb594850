// SPDX-License-Identifier: Apache-2.0
// The ref target's kernel interface: one plain function per op, over concrete runtime values.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <vector>

#include "compiler/ir/argument.h"
#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler::ref {

class Interpreter;

// What a ref kernel sees. Outputs whose type inference gave a static shape arrive allocated
// (zeroed); for the others (data-dependent shapes, sequences, optionals) the kernel calls
// allocate_output() or set_output().
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Argument*> inputs, std::vector<Argument>* outputs,
                Interpreter* interpreter)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs), interpreter_(interpreter) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_->size()); }
  // Input i exists, is not omitted, and is not an empty optional.
  bool has_input(int i) const {
    return i >= 0 && i < num_inputs() && inputs_[static_cast<size_t>(i)] != nullptr &&
           !inputs_[static_cast<size_t>(i)]->is_none();
  }
  const Argument& input_arg(int i) const;
  // Tensor input i (checked: present and a tensor).
  const Tensor& input(int i) const;

  // Output i as a tensor; it must already be allocated (static shape) or set.
  Tensor& output(int i);
  // Whether output i is consumed at all (ONNX lets a node leave optional outputs unnamed).
  bool output_used(int i) const;
  // (Re)allocates output i; fails with kResourceExhausted when memory runs out.
  Result<Tensor*> allocate_output(int i, DType dtype, const Shape& shape);
  void set_output(int i, Argument value);

  Status error(std::string_view message) const;
  template <class... Args>
  Status errorf(fmt::format_string<Args...> format, Args&&... args) const {
    return error(fmt::format(format, std::forward<Args>(args)...));
  }
  // `r`, its error (a helper's, without the node) made to name the node.
  template <class T>
  Result<T> named(Result<T> r) const {
    if (!r.ok()) return error(r.status().message());
    return r;
  }

  // Runs a subgraph (If branch, Loop/Scan body) with the given inputs; the subgraph sees the
  // values of every enclosing graph.
  Result<std::vector<Argument>> run_subgraph(const Graph& graph, std::vector<Argument> inputs);
  // The interpreter's seeded generator, for random ops.
  std::mt19937_64& rng();

 private:
  const Node& node_;
  std::vector<const Argument*> inputs_;
  std::vector<Argument>* outputs_;
  Interpreter* interpreter_;
};

// The per-op kernel, specialised in targets/ref/<family>.cc for each op of the family.
template <class T>
Status run_op(const T& op, KernelContext& ctx);

// Dispatches to run_op<T> for the node's op kind.
Status run_node(const Node& node, KernelContext& ctx);

}  // namespace kiln::compiler::ref
