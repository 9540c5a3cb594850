// SPDX-License-Identifier: Apache-2.0
// Shape profiles: a graph with dynamic dims (e.g. the batch) compiled once per input shape seen,
// and the results cached, so each shape runs as a fully planned static program.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/ir/argument.h"
#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler {

class Executable;

// Whether `graph` can be specialized per input shape: tensor inputs (some with dynamic dims), no
// subgraphs.
bool can_specialize(const Graph& graph);

// A copy of `graph` whose inputs have the static shapes of `inputs` (one tensor per graph input),
// with every node's output type inferred anew from them. Constants share their storage.
Result<std::shared_ptr<Graph>> specialize_graph(const Graph& graph,
                                                const std::vector<Argument>& inputs);

// The executables compiled so far for one dynamic graph, keyed by input shapes. Thread-safe:
// concurrent runs of new shapes compile at once (the first to finish is kept); at most `capacity`
// profiles are kept, the least recently used one dropped first.
class ShapeProfiles {
 public:
  // Compiles a static specialization of the graph (the target's passes and finalize).
  using Compile = std::function<Result<std::shared_ptr<Executable>>(std::shared_ptr<Graph>)>;
  ShapeProfiles(const Graph& graph, Compile compile, size_t capacity = 16)
      : graph_(graph), compile_(std::move(compile)), capacity_(capacity) {}

  // The executable for the shapes of `inputs`, compiled on first sight.
  Result<std::shared_ptr<Executable>> get(const std::vector<Argument>& inputs) const;
  // How many profiles are cached, and how many compilations ran (for tests and logs).
  size_t size() const;
  size_t compilations() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<Executable> executable;
  };
  const Graph& graph_;
  Compile compile_;
  size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::list<Entry> entries_;  // most recently used first
  mutable size_t compilations_ = 0;
};

}  // namespace kiln::compiler
