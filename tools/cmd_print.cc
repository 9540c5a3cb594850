// SPDX-License-Identifier: Apache-2.0
// `kiln print`: a model's IR as text, Graphviz or JSON, as imported or after the target's passes.
#include <fmt/format.h>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "tools/command.h"
#include "tools/json_writer.h"
#include "tools/target_option.h"

namespace kiln::tools {

namespace {

// The artifact header as "# key: value" lines.
std::string describe_artifact(const compiler::Artifact& a) {
  const compiler::ArtifactHeader& h = a.header();
  std::string out = fmt::format("# artifact: {} ({} bytes, format version {})\n", a.name(),
                                a.size(), h.format_version);
  out += fmt::format("# kiln version: {}\n# target: {}\n", h.kiln_version, h.target);
  for (const auto& [key, value] : h.fingerprint) out += fmt::format("# {}: {}\n", key, value);
  out += fmt::format("# options: optimize={} seed={}\n", h.options.optimize, h.options.seed);
  out += fmt::format("# source: {} ({} bytes, xxh64 {:016x})\n", h.source.name, h.source.size,
                     h.source.hash);
  for (const auto& [key, value] : h.source.options) out += fmt::format("# {}: {}\n", key, value);
  for (const compiler::ArtifactSection& s : a.sections()) {
    out += fmt::format("# section {}: {} bytes at {}\n", s.name, s.size, s.offset);
  }
  out += fmt::format("# recompile: {}\n", h.source.recompile_command);
  return out;
}

// {"name", "size", "format_version", "kiln_version", "target", "fingerprint": {..}, "options",
// "source": {..}, "sections": [..]}.
void artifact_json(JsonWriter& j, const compiler::Artifact& a) {
  const compiler::ArtifactHeader& h = a.header();
  j.begin_object()
      .field("name", a.name())
      .field("bytes", static_cast<uint64_t>(a.size()))
      .field("format_version", h.format_version)
      .field("kiln_version", h.kiln_version)
      .field("target", h.target);
  j.key("fingerprint").begin_object();
  for (const auto& [key, value] : h.fingerprint) j.field(key, value);
  j.end_object();
  j.key("options")
      .begin_object()
      .field("optimize", h.options.optimize)
      .field("seed", h.options.seed)
      .end_object();
  j.key("source")
      .begin_object()
      .field("name", h.source.name)
      .field("bytes", h.source.size)
      .field("xxh64", fmt::format("{:016x}", h.source.hash));
  j.key("options").begin_object();
  for (const auto& [key, value] : h.source.options) j.field(key, value);
  j.end_object().field("recompile_command", h.source.recompile_command).end_object();
  j.key("sections").begin_array();
  for (const compiler::ArtifactSection& s : a.sections()) {
    j.begin_object().field("name", s.name).field("offset", s.offset).field("bytes", s.size);
    j.end_object();
  }
  j.end_array().end_object();
}

// {"name", "inputs": [{"name", "type"}], "nodes": [{"name", "op", "attributes", "inputs",
// "outputs", "subgraphs"}], "outputs": [names]}; a missing optional input is null.
void graph_json(JsonWriter& j, const compiler::Graph& g) {
  j.begin_object().field("name", g.name());
  j.key("inputs").begin_array();
  for (const compiler::Value* v : g.inputs()) {
    j.begin_object().field("name", v->name()).field("type", v->type().to_string()).end_object();
  }
  j.end_array().key("nodes").begin_array();
  for (const auto& node : g.nodes()) {
    j.begin_object()
        .field("name", node->name())
        .field("op", std::string(node->op().name()))
        .field("attributes", node->op().attributes_string());
    j.key("inputs").begin_array();
    for (const compiler::Value* in : node->inputs()) {
      if (in == nullptr) {
        j.null();
      } else {
        j.value(in->name());
      }
    }
    j.end_array().key("outputs").begin_array();
    for (const compiler::Value* out : node->outputs()) {
      j.begin_object()
          .field("name", out->name())
          .field("type", out->type().to_string())
          .end_object();
    }
    j.end_array();
    const std::vector<compiler::Graph*> subgraphs = node->op().subgraphs();
    if (!subgraphs.empty()) {
      j.key("subgraphs").begin_array();
      for (const compiler::Graph* sub : subgraphs) graph_json(j, *sub);
      j.end_array();
    }
    j.end_object();
  }
  j.end_array().key("outputs").begin_array();
  for (const compiler::Value* v : g.outputs()) j.value(v != nullptr ? v->name() : "");
  j.end_array().end_object();
}

struct Options {
  std::string model;
  std::string format = "text";
  TargetOption target;
  bool optimized = false;
  bool json = false;
};

int print_model(const Options& opts) {
  if (compiler::is_artifact_file(opts.model)) {
    auto artifact = compiler::open_artifact(opts.model);
    if (!artifact.ok()) return report_error(artifact.status());
    auto graph = artifact->graph();
    if (!graph.ok()) return report_error(graph.status());
    if (opts.json) {
      JsonWriter j;
      j.begin_object().field("model", opts.model).key("artifact");
      artifact_json(j, *artifact);
      j.field("optimized_for", artifact->header().target).key("graph");
      graph_json(j, **graph);
      j.end_object();
      fmt::print("{}", j.str());
    } else if (opts.format == "dot") {
      fmt::print("{}", compiler::print_graph_dot(**graph));
    } else {
      fmt::print("{}{}", describe_artifact(*artifact), compiler::print_graph(**graph));
    }
    return 0;
  }
  auto model = compiler::import_onnx_file(opts.model);
  if (!model.ok()) return report_error(model.status());
  compiler::Graph& graph = *(*model)->graph;
  std::string target_name;
  if (opts.optimized) {
    auto resolved = resolve_target(opts.target);
    if (!resolved.ok()) return report_error(resolved.status());
    target_name = resolved->name;
    auto target = compiler::make_target(target_name);
    if (!target.ok()) return report_error(target.status());
    compiler::PassManager pm((*target)->passes({}));
    Status s = pm.run(graph);
    if (!s.ok()) return report_error(s);
  }
  if (opts.json) {
    JsonWriter j;
    j.begin_object().field("model", opts.model).key("artifact").null().key("optimized_for");
    if (target_name.empty()) {
      j.null();
    } else {
      j.value(target_name);
    }
    j.key("graph");
    graph_json(j, graph);
    j.end_object();
    fmt::print("{}", j.str());
    return 0;
  }
  fmt::print(
      "{}", opts.format == "dot" ? compiler::print_graph_dot(graph) : compiler::print_graph(graph));
  return 0;
}

}  // namespace

CommandAction add_print_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("print", "Print a model's IR");
  cmd->add_option("model", opts->model,
                  "the .onnx model, or a .kiln artifact (its header, then its optimized graph)")
      ->required();
  cmd->add_flag("--optimized", opts->optimized, "print after the target's optimization passes");
  add_target_option(cmd, &opts->target, "the target whose passes --optimized runs");
  CLI::Option* format = cmd->add_option("--format", opts->format, "text or dot (Graphviz)")
                            ->check(CLI::IsMember({"text", "dot"}))
                            ->capture_default_str();
  cmd->add_flag("--json", opts->json,
                "print one JSON object: the graph's inputs, nodes (op, attributes as text, "
                "inputs, typed outputs, subgraphs) and outputs, and an artifact's header")
      ->excludes(format);
  return [opts] { return print_model(*opts); };
}

}  // namespace kiln::tools
