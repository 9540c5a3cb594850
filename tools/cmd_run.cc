// SPDX-License-Identifier: Apache-2.0
// `kiln run`: compile a model for a target (or load an artifact) and run it once on given or
// random inputs.
#include <fmt/format.h>

#include <chrono>

#include "compiler/quantize/quantize.h"
#include "compiler/targets/target.h"
#include "tools/command.h"
#include "tools/compile_model.h"
#include "tools/model_io.h"
#include "tools/quantize_flags.h"

namespace kiln::tools {

CommandAction add_run_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string target = "ref";
    std::string output_dir;
    std::string precision = "f32";
    ModelInputOptions inputs;
    QuantizeFlags quantize;
    bool no_cache = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Compile a model and run it once");
  cmd->add_option("model", opts->model, "the .onnx model, or a .kiln artifact")->required();
  CLI::Option* target_option =
      cmd->add_option("--target", opts->target,
                      "ref, or another target this build has (an artifact runs on its own)")
          ->capture_default_str();
  cmd->add_option("--input", opts->inputs.inputs, "NAME=FILE.npy; inputs not given are random");
  cmd->add_option("--input-shape", opts->inputs.input_shapes,
                  "NAME=1x3x224x224 for a dynamic input");
  cmd->add_option("--output-dir", opts->output_dir,
                  "write each output as DIR/<name>.npy plus DIR/outputs.json");
  cmd->add_option("--seed", opts->inputs.seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "f32 (the model as it is) or f64: every f32, f16 and bf16 tensor computed in "
                  "float64, a reference for accuracy (with --target ref; inputs of the model's "
                  "types, f64 outputs)")
      ->check(CLI::IsMember({"f32", "f64"}))
      ->capture_default_str();
  add_quantize_flags(cmd, &opts->quantize, true);
  cmd->add_flag("--no-cache", opts->no_cache,
                "compile an .onnx model again instead of loading it from the compile cache "
                "($KILN_CACHE_DIR/artifacts, else ~/.cache/kiln/artifacts), and do not cache it");
  return [opts, target_option] {
    using ms = std::chrono::duration<double, std::milli>;
    auto prepared = prepare_model(opts->model, opts->inputs);
    if (!prepared.ok()) return report_error(prepared.status());
    std::shared_ptr<compiler::Executable> exe = prepared->executable;
    std::string how;
    if (exe != nullptr && opts->quantize.any()) {
      return report_error(invalid_argument_error(fmt::format(
          "{} is a compiled artifact; --fp16/--bf16 apply to an .onnx model (compile it with "
          "kiln compile --fp16/--bf16)",
          opts->model)));
    }
    const bool f64 = opts->precision == "f64";
    if (f64 && (exe != nullptr || opts->quantize.any())) {
      return report_error(invalid_argument_error(fmt::format(
          "--precision f64 converts an .onnx model as imported; it cannot be combined with {}",
          exe != nullptr ? opts->model + ", a compiled artifact" : "--fp16/--bf16")));
    }
    if (exe != nullptr) {
      if (target_option->count() > 0 && opts->target != prepared->artifact.target) {
        return report_error(invalid_argument_error(fmt::format(
            "{} was compiled for target {}; it cannot run on --target {}: drop --target, or "
            "compile the .onnx model for {} with kiln compile",
            opts->model, prepared->artifact.target, opts->target, opts->target)));
      }
      how = fmt::format("loaded the artifact in {:.1f} ms", prepared->load_ms);
    } else {
      CompileChoice choice;
      choice.target = opts->target;
      if (f64) {
        choice.rewrite = [](compiler::Graph& g, const compiler::Target&) {
          return compiler::convert_to_f64(g);
        };
        choice.rewrite_flags.emplace_back("precision", "f64");
        // The widened types are part of the compile-cache key and of the artifact's record.
        choice.rewrite_flags.emplace_back("f64-widens", "f32,f16,bf16");
      } else if (opts->quantize.any()) {
        choice.rewrite = [q = opts->quantize](compiler::Graph& g, const compiler::Target& t) {
          return apply_quantization(g, q, t);
        };
        choice.rewrite_flags = opts->quantize.as_options();
      }
      // int8's key holds the hash of its calibration data, which the flags only name.
      choice.data_hash = opts->quantize.data_hash();
      choice.use_cache = !opts->no_cache && (!opts->quantize.int8 || choice.data_hash != 0);
      auto compiled = compile_for_run(opts->model, *prepared, choice);
      if (!compiled.ok()) return report_error(compiled.status());
      exe = std::move(compiled->executable);
      how = std::move(compiled->how);
    }
    auto start = std::chrono::steady_clock::now();
    auto outputs = exe->run(std::move(prepared->inputs));
    if (!outputs.ok()) return report_error(outputs.status());
    auto ran = std::chrono::steady_clock::now();
    std::vector<std::string> names;
    for (const compiler::Value* v : exe->graph().outputs()) names.push_back(v->name());
    for (size_t i = 0; i < names.size(); ++i)
      fmt::print("{}: {}\n", names[i], summarize((*outputs)[i]));
    fmt::print("target {}: {}, ran in {:.1f} ms\n", exe->target(), how, ms(ran - start).count());
    if (!opts->output_dir.empty()) {
      Status s = write_outputs(opts->output_dir, names, *outputs);
      if (!s.ok()) return report_error(s);
      fmt::print("wrote {} outputs to {}\n", names.size(), opts->output_dir);
    }
    return 0;
  };
}

}  // namespace kiln::tools
