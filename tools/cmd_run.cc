// SPDX-License-Identifier: Apache-2.0
// `kiln run`: compile a model for a target and run it once on given or random inputs.
#include <fmt/format.h>

#include <chrono>

#include "compiler/targets/target.h"
#include "tools/command.h"
#include "tools/model_io.h"

namespace kiln::tools {

CommandAction add_run_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string target = "ref";
    std::string output_dir;
    ModelInputOptions inputs;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Compile a model and run it once");
  cmd->add_option("model", opts->model, "the .onnx model")->required();
  cmd->add_option("--target", opts->target, "ref, or another target this build has")
      ->capture_default_str();
  cmd->add_option("--input", opts->inputs.inputs, "NAME=FILE.npy; inputs not given are random");
  cmd->add_option("--input-shape", opts->inputs.input_shapes,
                  "NAME=1x3x224x224 for a dynamic input");
  cmd->add_option("--output-dir", opts->output_dir,
                  "write each output as DIR/<name>.npy plus DIR/outputs.json");
  cmd->add_option("--seed", opts->inputs.seed, "seed of the random inputs")->capture_default_str();
  return [opts] {
    auto prepared = prepare_model(opts->model, opts->inputs);
    if (!prepared.ok()) return report_error(prepared.status());
    auto target = compiler::make_target(opts->target);
    if (!target.ok()) return report_error(target.status());
    std::shared_ptr<compiler::Graph> graph(std::move(prepared->model->graph));
    auto start = std::chrono::steady_clock::now();
    auto exe = compiler::compile(graph, **target);
    if (!exe.ok()) return report_error(exe.status());
    auto compiled = std::chrono::steady_clock::now();
    auto outputs = (*exe)->run(std::move(prepared->inputs));
    if (!outputs.ok()) return report_error(outputs.status());
    auto ran = std::chrono::steady_clock::now();
    std::vector<std::string> names;
    for (const compiler::Value* v : (*exe)->graph().outputs()) names.push_back(v->name());
    for (size_t i = 0; i < names.size(); ++i)
      fmt::print("{}: {}\n", names[i], summarize((*outputs)[i]));
    using ms = std::chrono::duration<double, std::milli>;
    fmt::print("target {}: compiled in {:.1f} ms, ran in {:.1f} ms\n", opts->target,
               ms(compiled - start).count(), ms(ran - compiled).count());
    if (!opts->output_dir.empty()) {
      Status s = write_outputs(opts->output_dir, names, *outputs);
      if (!s.ok()) return report_error(s);
      fmt::print("wrote {} outputs to {}\n", names.size(), opts->output_dir);
    }
    return 0;
  };
}

}  // namespace kiln::tools
