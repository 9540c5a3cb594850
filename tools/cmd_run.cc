// SPDX-License-Identifier: Apache-2.0
// `kiln run`: compile a model for a target (or load an artifact) and run it once on given or
// random inputs, or on image files through a data pipeline.
#include <fmt/format.h>

#include <chrono>
#include <map>

#include "compiler/quantize/quantize.h"
#include "compiler/targets/target.h"
#include "tools/command.h"
#include "tools/compile_model.h"
#include "tools/image_input.h"
#include "tools/json_writer.h"
#include "tools/model_io.h"
#include "tools/output_report.h"
#include "tools/quantize_flags.h"
#include "tools/target_option.h"

namespace kiln::tools {

namespace {

struct Options {
  std::string model;
  TargetOption target;
  std::string output_dir;
  std::string precision = "f32";
  std::string pipeline;
  int top = 0;
  bool json = false;
  ModelInputOptions inputs;
  QuantizeFlags quantize;
  bool no_cache = false;
};

// Moves the --input NAME=IMAGE values out of `opts.inputs.inputs` and runs them through
// --pipeline, an input's images (in the order given) making one batch.
Status read_image_inputs(Options& opts) {
  std::map<std::string, std::vector<std::string>> images;
  std::vector<std::string> others;
  for (const std::string& value : opts.inputs.inputs) {
    const size_t eq = value.rfind('=');
    const std::string file = eq == std::string::npos ? value : value.substr(eq + 1);
    if (eq == std::string::npos || eq == 0 || !is_image_file(file)) {
      others.push_back(value);
      continue;
    }
    if (opts.pipeline.empty()) {
      return invalid_argument_error(fmt::format(
          "--input {}: an image becomes a model input through a data pipeline; add --pipeline "
          "P.json (e.g. the pipeline.json of a server's pipeline model), or give a .npy file",
          value));
    }
    images[value.substr(0, eq)].push_back(file);
  }
  if (images.empty() && !opts.pipeline.empty()) {
    return invalid_argument_error(fmt::format(
        "--pipeline {}: no --input NAME=FILE.png (or .jpg) to run through it", opts.pipeline));
  }
  for (const auto& [name, files] : images) {
    Result<Tensor> t = images_through_pipeline(files, opts.pipeline);
    if (!t.ok()) return t.status().with_context(fmt::format("--input {}", name));
    opts.inputs.tensors[name] = std::move(t).value();
  }
  opts.inputs.inputs = std::move(others);
  return Status();
}

int run_model(Options& opts) {
  using ms = std::chrono::duration<double, std::milli>;
  Status images = read_image_inputs(opts);
  if (!images.ok()) return report_error(images);
  auto prepared = prepare_model(opts.model, opts.inputs);
  if (!prepared.ok()) return report_error(prepared.status());
  std::shared_ptr<compiler::Executable> exe = prepared->executable;
  if (exe != nullptr && opts.quantize.any()) {
    return report_error(invalid_argument_error(fmt::format(
        "{} is a compiled artifact; --fp16/--bf16 apply to an .onnx model (compile it with "
        "kiln compile --fp16/--bf16)",
        opts.model)));
  }
  const bool f64 = opts.precision == "f64";
  if (f64 && (exe != nullptr || opts.quantize.any())) {
    return report_error(invalid_argument_error(fmt::format(
        "--precision f64 converts an .onnx model as imported; it cannot be combined with {}",
        exe != nullptr ? opts.model + ", a compiled artifact" : "--fp16/--bf16")));
  }
  std::string how;
  bool from_cache = false;
  double prepare_ms = 0;
  if (exe != nullptr) {
    // An artifact runs on the target it was compiled for; --target may only repeat it.
    if (opts.target.was_given() && opts.target.given != prepared->artifact.target) {
      return report_error(invalid_argument_error(fmt::format(
          "{} was compiled for target {}; it cannot run on --target {}: drop --target, or "
          "compile the .onnx model for {} with kiln compile",
          opts.model, prepared->artifact.target, opts.target.given, opts.target.given)));
    }
    prepare_ms = prepared->load_ms;
    how = fmt::format("loaded the artifact in {:.1f} ms", prepared->load_ms);
  } else {
    auto target = resolve_target(opts.target);
    if (!target.ok()) return report_error(target.status());
    CompileChoice choice;
    choice.target = target->name;
    if (f64) {
      choice.rewrite = [](compiler::Graph& g, const compiler::Target&) {
        return compiler::convert_to_f64(g);
      };
      choice.rewrite_flags.emplace_back("precision", "f64");
      // The widened types are part of the compile-cache key and of the artifact's record.
      choice.rewrite_flags.emplace_back("f64-widens", "f32,f16,bf16");
    } else if (opts.quantize.any()) {
      choice.rewrite = [q = opts.quantize](compiler::Graph& g, const compiler::Target& t) {
        return apply_quantization(g, q, t);
      };
      choice.rewrite_flags = opts.quantize.as_options();
    }
    // int8's key holds the hash of its calibration data, which the flags only name.
    choice.data_hash = opts.quantize.data_hash();
    choice.use_cache = !opts.no_cache && (!opts.quantize.int8 || choice.data_hash != 0);
    auto compiled = compile_for_run(opts.model, *prepared, choice);
    if (!compiled.ok()) return report_error(compiled.status());
    exe = std::move(compiled->executable);
    how = std::move(compiled->how);
    from_cache = compiled->from_cache;
    prepare_ms = compiled->ms;
  }
  auto start = std::chrono::steady_clock::now();
  auto outputs = exe->run(std::move(prepared->inputs));
  if (!outputs.ok()) return report_error(outputs.status());
  const double run_ms = ms(std::chrono::steady_clock::now() - start).count();
  std::vector<std::string> names;
  for (const compiler::Value* v : exe->graph().outputs()) names.push_back(v->name());
  if (!opts.output_dir.empty()) {
    Status s = write_outputs(opts.output_dir, names, *outputs);
    if (!s.ok()) return report_error(s);
  }
  if (opts.json) {
    JsonWriter j;
    j.begin_object()
        .field("model", opts.model)
        .field("target", std::string(exe->target()))
        .field("artifact", prepared->executable != nullptr)
        .field("from_cache", from_cache)
        .field(prepared->executable != nullptr ? "load_ms" : "compile_ms", prepare_ms)
        .field("run_ms", run_ms);
    j.key("outputs").begin_array();
    for (size_t i = 0; i < names.size(); ++i) output_json(j, names[i], (*outputs)[i], opts.top);
    j.end_array();
    j.key("output_dir");
    if (opts.output_dir.empty()) {
      j.null();
    } else {
      j.value(opts.output_dir);
    }
    j.end_object();
    fmt::print("{}", j.str());
    return 0;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    fmt::print("{}: {}\n", names[i], summarize((*outputs)[i]));
    if (opts.top > 0 && (*outputs)[i].is_tensor()) {
      fmt::print("{}", top_classes_text(names[i], top_classes((*outputs)[i].tensor(), opts.top)));
    }
  }
  fmt::print("target {}: {}, ran in {:.1f} ms\n", exe->target(), how, run_ms);
  if (!opts.output_dir.empty()) {
    fmt::print("wrote {} outputs to {}\n", names.size(), opts.output_dir);
  }
  return 0;
}

}  // namespace

CommandAction add_run_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Compile a model and run it once");
  cmd->add_option("model", opts->model, "the .onnx model, or a .kiln artifact")->required();
  add_target_option(cmd, &opts->target,
                    "the target to compile for (an artifact runs on its own; --target may only "
                    "repeat it)");
  cmd->add_option("--input", opts->inputs.inputs,
                  "NAME=FILE.npy, or NAME=IMAGE.png/.jpg with --pipeline (several images for one "
                  "input make a batch); inputs not given are random");
  cmd->add_option("--pipeline", opts->pipeline,
                  "pipeline JSON that turns --input images into the input (its reader is fed the "
                  "files, as a server's pipeline model is fed requests)");
  cmd->add_option("--input-shape", opts->inputs.input_shapes,
                  "NAME=1x3x224x224 for a dynamic input");
  cmd->add_option("--output-dir", opts->output_dir,
                  "write each output as DIR/<name>.npy plus DIR/outputs.json");
  cmd->add_option("--top", opts->top,
                  "also print the K largest values of each output row with their indices (a "
                  "classifier's top classes)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", opts->json,
                "print one JSON object (target, timings, every output's dtype, shape and values, "
                "--top's classes) instead of the text");
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
  return [opts] { return run_model(*opts); };
}

}  // namespace kiln::tools
