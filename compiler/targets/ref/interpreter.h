// SPDX-License-Identifier: Apache-2.0
// The ref interpreter: walks a graph in order, infers each node's concrete output shapes from its
// actual inputs, and runs the node's ref kernel. Obvious and slow by design.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/argument.h"
#include "core/status.h"

namespace kiln::compiler::ref {

class Interpreter {
 public:
  explicit Interpreter(uint64_t seed = 0) : rng_(seed) {}

  // Runs `graph` with one argument per graph input, in order; returns one per graph output.
  Result<std::vector<Argument>> run(const Graph& graph, std::vector<Argument> inputs);
  // Runs a subgraph from inside a kernel; the enclosing graphs' values stay visible.
  Result<std::vector<Argument>> run_subgraph(const Graph& graph, std::vector<Argument> inputs);

  // Runs one node on the given input values (nullptr for an omitted input) and returns its
  // outputs; constant folding uses this to evaluate nodes at compile time.
  Result<std::vector<Argument>> evaluate(const Node& node, std::vector<const Argument*> inputs);

  std::mt19937_64& rng() { return rng_; }

 private:
  struct Frame {
    std::unordered_map<const Value*, Argument> values;
    const Frame* parent = nullptr;
  };
  Result<std::vector<Argument>> run_frame(const Graph& graph, std::vector<Argument> inputs,
                                          const Frame* parent);
  Status run_node_in(const Node& node, Frame& frame);
  static const Argument* lookup(const Frame& frame, const Value* value);

  std::mt19937_64 rng_;
  const Frame* current_ = nullptr;
};

}  // namespace kiln::compiler::ref
