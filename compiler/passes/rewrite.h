// SPDX-License-Identifier: Apache-2.0
// The small helpers local rewrites share: matching constants, replacing a node by a value, and
// running rewrite rules to a fixpoint.
#pragma once

#include <functional>

#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler {

// True when `v` is returned by its graph (its name must then be kept).
bool is_graph_output(const Value* v);

// True when `v` is a constant whose every element equals `x` (numeric dtypes only).
bool is_constant_filled_with(const Value* v, double x);

// Replaces every use of `node`'s output `index` by `value`. When the output is a graph output the
// graph returns `value` instead, so the node may become dead; returns false (and changes nothing)
// only when that would rename a graph output that is also an input of the graph.
bool forward_output(Node* node, int index, Value* value);

// forward_output(node, 0, value), then erases `node` when nothing uses it any more. Rules call this
// on the node they are looking at only (other nodes are left for dead-code elimination).
bool replace_node(Graph& graph, Node* node, Value* value);

// A rule looks at one node and rewrites it (through the graph API) or returns false.
using RewriteRule = std::function<Result<bool>(Graph&, Node*)>;

// Applies `rules` to every node (and to subgraphs) until none fires, at most `max_rounds` times
// over the graph; returns whether anything changed.
Result<bool> rewrite_to_fixpoint(Graph& graph, const std::vector<RewriteRule>& rules,
                                 int max_rounds = 16);

}  // namespace kiln::compiler
