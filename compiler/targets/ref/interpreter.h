// SPDX-License-Identifier: Apache-2.0
// The ref interpreter: walks a graph in order, infers each node's concrete output shapes from its
// actual inputs, and runs the node's ref kernel. Obvious and slow by design.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "compiler/ir/argument.h"
#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler::ref {

class KernelContext;

// A target's own kernel for one node, run in place of the node's ref kernel. It sees what a ref
// kernel sees: outputs whose inferred shapes are static arrive allocated. It may hand the node
// back to the ref kernel with run_node() (e.g. for shapes it was not compiled for).
class NodeKernel {
 public:
  virtual ~NodeKernel() = default;
  virtual Status run(KernelContext& ctx) const = 0;
};

// A target's kernels by node; nodes not in it run their ref kernels.
using KernelTable = std::unordered_map<const Node*, std::unique_ptr<NodeKernel>>;

class Interpreter {
 public:
  // `kernels` (optional, must outlive the interpreter) overrides the ref kernel of its nodes.
  explicit Interpreter(uint64_t seed = 0, const KernelTable* kernels = nullptr)
      : rng_(seed), kernels_(kernels) {}

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
  const KernelTable* kernels_;
  const Frame* current_ = nullptr;
};

}  // namespace kiln::compiler::ref
