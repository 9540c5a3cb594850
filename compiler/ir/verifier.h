// SPDX-License-Identifier: Apache-2.0
// The IR verifier: use lists agree with inputs, values are defined before use, outputs exist.
#pragma once

#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler {

// Checks `graph` and its subgraphs; returns an internal error naming the first broken invariant.
Status verify_graph(const Graph& graph);

}  // namespace kiln::compiler
