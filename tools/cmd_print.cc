// SPDX-License-Identifier: Apache-2.0
// `kiln print`: a model's IR as text or Graphviz, as imported or after the target's passes.
#include <fmt/format.h>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "tools/command.h"

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

}  // namespace

CommandAction add_print_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string format = "text";
    std::string target = "ref";
    bool optimized = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("print", "Print a model's IR");
  cmd->add_option("model", opts->model,
                  "the .onnx model, or a .kiln artifact (its header, then its optimized graph)")
      ->required();
  cmd->add_flag("--optimized", opts->optimized, "print after the target's optimization passes");
  cmd->add_option("--target", opts->target, "the target whose passes --optimized runs")
      ->capture_default_str();
  cmd->add_option("--format", opts->format, "text or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "dot"}))
      ->capture_default_str();
  return [opts] {
    if (compiler::is_artifact_file(opts->model)) {
      auto artifact = compiler::open_artifact(opts->model);
      if (!artifact.ok()) return report_error(artifact.status());
      auto graph = artifact->graph();
      if (!graph.ok()) return report_error(graph.status());
      if (opts->format == "dot") {
        fmt::print("{}", compiler::print_graph_dot(**graph));
      } else {
        fmt::print("{}{}", describe_artifact(*artifact), compiler::print_graph(**graph));
      }
      return 0;
    }
    auto model = compiler::import_onnx_file(opts->model);
    if (!model.ok()) return report_error(model.status());
    compiler::Graph& graph = *(*model)->graph;
    if (opts->optimized) {
      auto target = compiler::make_target(opts->target);
      if (!target.ok()) return report_error(target.status());
      compiler::PassManager pm((*target)->passes({}));
      Status s = pm.run(graph);
      if (!s.ok()) return report_error(s);
    }
    fmt::print("{}", opts->format == "dot" ? compiler::print_graph_dot(graph)
                                           : compiler::print_graph(graph));
    return 0;
  };
}

}  // namespace kiln::tools
