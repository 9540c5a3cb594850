// SPDX-License-Identifier: Apache-2.0
// Text and Graphviz printing of graphs; the text form is stable enough for golden tests.
#pragma once

#include <string>

#include "compiler/ir/graph.h"

namespace kiln::compiler {

// graph main(%x: f32[1,3,224,224]) {
//   %y = Relu(%x)  # "relu1"
//   return %y
// }
// Value names are the model's; nodes print in order; subgraphs nest, indented.
std::string print_graph(const Graph& graph);
// The graph as Graphviz `digraph`, one box per node, edges labelled with tensor types.
std::string print_graph_dot(const Graph& graph);

}  // namespace kiln::compiler
