// SPDX-License-Identifier: Apache-2.0
// `kiln print`: a model's IR as text or Graphviz, as imported or after the target's passes.
#include <fmt/format.h>

#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "tools/command.h"

namespace kiln::tools {

CommandAction add_print_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string format = "text";
    std::string target = "ref";
    bool optimized = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("print", "Print a model's IR");
  cmd->add_option("model", opts->model, "the .onnx model")->required();
  cmd->add_flag("--optimized", opts->optimized, "print after the target's optimization passes");
  cmd->add_option("--target", opts->target, "the target whose passes --optimized runs")
      ->capture_default_str();
  cmd->add_option("--format", opts->format, "text or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "dot"}))
      ->capture_default_str();
  return [opts] {
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
