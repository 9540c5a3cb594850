// SPDX-License-Identifier: Apache-2.0
// clone_graph: a deep copy of a graph (subgraphs included) that shares constant storage.
#pragma once

#include <memory>
#include <unordered_map>

#include "compiler/ir/graph.h"

namespace kiln::compiler {

// A copy of `graph` with the same inputs, nodes, names, types and outputs. Subgraph attributes
// are copied too (their outer-scope references point into the copy); constant tensors share
// their storage with the original (tensors are immutable once in a graph). When `values` is
// given it receives, for every value of the original, its copy.
std::shared_ptr<Graph> clone_graph(const Graph& graph,
                                   std::unordered_map<const Value*, Value*>* values = nullptr);

}  // namespace kiln::compiler
