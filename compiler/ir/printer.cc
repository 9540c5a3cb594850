// SPDX-License-Identifier: Apache-2.0
// Graph printing.
#include "compiler/ir/printer.h"

#include <fmt/format.h>

#include <unordered_map>

namespace kiln::compiler {

namespace {

std::string value_ref(const Value* v) { return v ? "%" + v->name() : "_"; }

void print_into(const Graph& g, int indent, std::string& out) {
  std::string pad(static_cast<size_t>(indent), ' ');
  out += fmt::format("{}graph {}(", pad, g.name());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    out += fmt::format("{}%{}: {}", i ? ", " : "", v->name(), v->type().to_string());
  }
  out += ") {\n";
  for (const auto& node : g.nodes()) {
    out += pad + "  ";
    for (int i = 0; i < node->num_outputs(); ++i) {
      const Value* v = node->output(i);
      out += fmt::format("{}%{}: {}", i ? ", " : "", v->name(), v->type().to_string());
    }
    out += fmt::format(" = {}{}(", node->op().name(), node->op().attributes_string());
    for (int i = 0; i < node->num_inputs(); ++i) {
      out += fmt::format("{}{}", i ? ", " : "", value_ref(node->input(i)));
    }
    out += ")";
    if (!node->name().empty()) out += fmt::format("  # \"{}\"", node->name());
    out += "\n";
    for (const Graph* sub : node->op().subgraphs()) print_into(*sub, indent + 4, out);
  }
  out += pad + "  return ";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += fmt::format("{}{}", i ? ", " : "", value_ref(g.outputs()[i]));
  }
  out += "\n" + pad + "}\n";
}

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string print_graph(const Graph& graph) {
  std::string out;
  print_into(graph, 0, out);
  return out;
}

std::string print_graph_dot(const Graph& graph) {
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
                                dot_escape(graph.name()));
  std::unordered_map<const Value*, std::string> source;
  int id = 0;
  for (const Value* v : graph.inputs()) {
    std::string n = fmt::format("in{}", id++);
    out += fmt::format("  {} [label=\"{}\\n{}\", shape=ellipse];\n", n, dot_escape(v->name()),
                       dot_escape(v->type().to_string()));
    source[v] = n;
  }
  for (const auto& node : graph.nodes()) {
    std::string n = fmt::format("n{}", id++);
    std::string label(node->op().name());
    if (!node->name().empty()) label += "\\n" + dot_escape(node->name());
    out += fmt::format("  {} [label=\"{}\"];\n", n, label);
    for (const Value* in : node->inputs()) {
      auto it = in ? source.find(in) : source.end();
      if (it != source.end()) {
        out += fmt::format("  {} -> {} [label=\"{}\"];\n", it->second, n, dot_escape(in->type().to_string()));
      }
    }
    for (const Value* o : node->outputs()) source[o] = n;
  }
  for (const Value* v : graph.outputs()) {
    std::string n = fmt::format("out{}", id++);
    out += fmt::format("  {} [label=\"{}\", shape=ellipse];\n", n, dot_escape(v->name()));
    auto it = source.find(v);
    if (it != source.end()) out += fmt::format("  {} -> {};\n", it->second, n);
  }
  out += "}\n";
  return out;
}

}  // namespace kiln::compiler
