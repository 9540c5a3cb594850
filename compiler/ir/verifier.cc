// SPDX-License-Identifier: Apache-2.0
// Graph invariants.
#include "compiler/ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace kiln::compiler {

namespace {

Status verify_in(const Graph& graph, std::unordered_set<const Value*>& defined) {
  for (const Value* v : graph.inputs()) defined.insert(v);
  for (const auto& node : graph.nodes()) {
    if (node->graph() != &graph) {
      return internal_error(fmt::format("{} is listed in graph \"{}\" but belongs to another", node->describe(), graph.name()));
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Value* in = node->input(i);
      if (in == nullptr) continue;
      if (!defined.count(in)) {
        return internal_error(fmt::format("{}: input {} (\"{}\") is used before it is defined",
                                          node->describe(), i, in->name()));
      }
      const auto& uses = in->uses();
      if (std::find(uses.begin(), uses.end(), Use{node.get(), i}) == uses.end()) {
        return internal_error(fmt::format("{}: input {} (\"{}\") is missing from its use list",
                                          node->describe(), i, in->name()));
      }
    }
    for (const Graph* sub : node->op().subgraphs()) {
      std::unordered_set<const Value*> inner = defined;
      KILN_RETURN_IF_ERROR(verify_in(*sub, inner));
    }
    for (int i = 0; i < node->num_outputs(); ++i) {
      const Value* out = node->output(i);
      if (out->producer() != node.get() || out->producer_index() != i) {
        return internal_error(fmt::format("{}: output {} does not point back to its node", node->describe(), i));
      }
      for (const Use& u : out->uses()) {
        if (u.node->input(u.index) != out) {
          return internal_error(fmt::format("{}: output \"{}\" has a stale use", node->describe(), out->name()));
        }
      }
      defined.insert(out);
    }
  }
  for (const Value* out : graph.outputs()) {
    if (out == nullptr || !defined.count(out)) {
      return internal_error(fmt::format("graph \"{}\": an output is not defined", graph.name()));
    }
  }
  return Status();
}

}  // namespace

Status verify_graph(const Graph& graph) {
  std::unordered_set<const Value*> defined;
  return verify_in(graph, defined);
}

}  // namespace kiln::compiler
