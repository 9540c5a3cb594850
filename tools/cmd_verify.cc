// SPDX-License-Identifier: Apache-2.0
// `kiln verify`: run a target and ref on the same inputs and compare every output, or (with
// --fp16/--bf16/--int8) a quantized model with its fp32 original.
#include <fmt/format.h>

#include <cmath>

#include "compiler/artifact/artifact.h"
#include "compiler/targets/target.h"
#include "tools/command.h"
#include "tools/json_writer.h"
#include "tools/model_io.h"
#include "tools/target_option.h"
#include "tools/verify_quantized.h"

namespace kiln::tools {

namespace {

struct Error {
  double max_abs = 0;
  double max_rel = 0;
  // The largest |ref - got| / (atol + rtol * |ref|): the error against its bound; within <= 1.
  double over_bound = 0;
  bool within = true;
  std::string problem;  // a dtype/shape mismatch
};

Error compare(const compiler::Argument& ref, const compiler::Argument& got, double rtol,
              double atol) {
  Error e;
  if (!ref.is_tensor() || !got.is_tensor()) {
    e.within = ref.to_string() == got.to_string();
    if (!e.within) e.problem = fmt::format("{} vs {}", ref.to_string(), got.to_string());
    return e;
  }
  const Tensor& a = ref.tensor();
  const Tensor& b = got.tensor();
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) {
    e.within = false;
    e.problem = fmt::format("ref gives {}{}, the target {}{}", dtype_name(a.dtype()),
                            a.shape().to_string(), dtype_name(b.dtype()), b.shape().to_string());
    return e;
  }
  visit_dtype(a.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) {
      for (int64_t i = 0; i < a.numel(); ++i) e.within &= a.data<T>()[i] == b.data<T>()[i];
    } else {
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = static_cast<double>(static_cast<float>(a.data<T>()[i]));
        double y = static_cast<double>(static_cast<float>(b.data<T>()[i]));
        if constexpr (std::is_same_v<T, double>) {
          x = a.data<T>()[i];
          y = b.data<T>()[i];
        }
        if (std::isnan(x) && std::isnan(y)) continue;
        double abs = std::abs(x - y);
        if (std::isnan(abs)) abs = INFINITY;
        e.max_abs = std::max(e.max_abs, abs);
        e.max_rel = std::max(e.max_rel, abs / std::max(std::abs(x), 1e-12));
        const double bound = atol + rtol * std::abs(x);
        e.over_bound = std::max(e.over_bound, bound > 0 ? abs / bound : (abs > 0 ? INFINITY : 0.0));
        e.within &= abs <= bound;
      }
    }
  });
  return e;
}

}  // namespace

CommandAction add_verify_command(CLI::App& app) {
  struct Options {
    std::string model;
    TargetOption target;
    double rtol = 1e-3;
    double atol = 1e-5;
    ModelInputOptions inputs;
    VerifyQuantizedOptions quantized;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("verify", "Run a target and ref on the same inputs and compare");
  cmd->add_option("model", opts->model,
                  "the .onnx model, or a .kiln artifact (checked against ref on its own graph)")
      ->required();
  add_target_option(cmd, &opts->target,
                    "the target to check against ref (an artifact is checked on its own)");
  cmd->add_option("--rtol", opts->rtol, "relative tolerance")->capture_default_str();
  cmd->add_option("--atol", opts->atol, "absolute tolerance")->capture_default_str();
  cmd->add_option("--input", opts->inputs.inputs, "NAME=FILE.npy; inputs not given are random");
  cmd->add_option("--input-shape", opts->inputs.input_shapes,
                  "NAME=1x3x224x224 for a dynamic input");
  cmd->add_option("--seed", opts->inputs.seed, "seed of the random inputs")->capture_default_str();
  VerifyQuantizedOptions& q = opts->quantized;
  add_quantize_flags(cmd, &q.quantize, true);
  cmd->add_option("--inputs", q.inputs,
                  "with --fp16/--bf16/--int8: a folder of inputs to compare over (.npy files, or "
                  "images with --pipeline)");
  cmd->add_option("--pipeline", q.pipeline, "pipeline JSON that turns --inputs images into inputs");
  cmd->add_option("--labels", q.labels,
                  "\"FILE LABEL\" lines (e.g. labels.txt): report the accuracy of both models");
  cmd->add_flag("--json", q.json,
                "print one JSON object (each output's errors and verdict) instead of the table");
  cmd->add_option("--min-top1", q.min_top1, "fail when top-1 agreement (percent) is below this");
  cmd->add_option("--min-cosine", q.min_cosine, "fail when cosine similarity is below this");
  cmd->add_flag("--per-layer", q.per_layer,
                "with --int8: keep each quantized layer in float in turn (same calibration) and "
                "report how much of the error it causes, the costliest first");
  return [opts] {
    const VerifyQuantizedOptions& given = opts->quantized;
    if (!given.quantize.any() &&
        (!given.inputs.empty() || !given.labels.empty() || !given.pipeline.empty())) {
      return report_error(invalid_argument_error(
          "--inputs, --labels and --pipeline compare a quantized model with fp32: add --fp16, "
          "--bf16 or --int8"));
    }
    if (given.per_layer && !given.quantize.int8) {
      return report_error(
          invalid_argument_error("--per-layer ranks int8 layers by the error they cause: add "
                                 "--int8 with --calibration and --inputs"));
    }
    if (given.quantize.any()) {
      auto target = resolve_target(opts->target);
      if (!target.ok()) return report_error(target.status());
      VerifyQuantizedOptions q = opts->quantized;
      q.model = opts->model;
      q.target = target->name;
      q.input_shapes = opts->inputs.input_shapes;
      return verify_quantized(q);
    }
    // Two loads give each target its own graph. An artifact's target runs the artifact; ref runs
    // the artifact's (already optimized) graph without passes.
    auto for_ref = prepare_model(opts->model, opts->inputs);
    if (!for_ref.ok()) return report_error(for_ref.status());
    auto for_target = prepare_model(opts->model, opts->inputs);
    if (!for_target.ok()) return report_error(for_target.status());
    auto ref_target = compiler::make_target("ref");
    std::shared_ptr<compiler::Executable> exe = for_target->executable;
    Result<std::shared_ptr<compiler::Executable>> ref_exe = internal_error("not compiled");
    std::string target_name;
    if (exe != nullptr) {
      if (opts->target.was_given() && opts->target.given != exe->target()) {
        return report_error(invalid_argument_error(
            fmt::format("{} was compiled for target {}; it cannot be verified on --target {}: "
                        "drop --target, or compile the .onnx model for {} with kiln compile",
                        opts->model, exe->target(), opts->target.given, opts->target.given)));
      }
      target_name = std::string(exe->target());
      compiler::CompileOptions as_stored = for_ref->artifact.options;
      as_stored.optimize = false;
      auto artifact = compiler::open_artifact(opts->model);
      if (!artifact.ok()) return report_error(artifact.status());
      auto graph = artifact->graph();
      if (!graph.ok()) return report_error(graph.status());
      ref_exe = compiler::compile(*graph, **ref_target, as_stored);
    } else {
      auto resolved = resolve_target(opts->target);
      if (!resolved.ok()) return report_error(resolved.status());
      target_name = resolved->name;
      auto target = compiler::make_target(target_name);
      if (!target.ok()) return report_error(target.status());
      ref_exe = compiler::compile(
          std::shared_ptr<compiler::Graph>(std::move(for_ref->model->graph)), **ref_target);
      auto compiled = compiler::compile(
          std::shared_ptr<compiler::Graph>(std::move(for_target->model->graph)), **target);
      if (!compiled.ok()) return report_error(compiled.status());
      exe = std::move(compiled).value();
    }
    if (!ref_exe.ok()) return report_error(ref_exe.status());
    auto expected = (*ref_exe)->run(std::move(for_ref->inputs));
    if (!expected.ok()) return report_error(expected.status());
    auto actual = exe->run(std::move(for_target->inputs));
    if (!actual.ok()) return report_error(actual.status());
    bool all_ok = true;
    std::vector<Error> errors;
    for (size_t i = 0; i < expected->size(); ++i) {
      errors.push_back(compare((*expected)[i], (*actual)[i], opts->rtol, opts->atol));
      all_ok &= errors.back().within;
    }
    const auto& outputs = (*ref_exe)->graph().outputs();
    if (given.json) {
      JsonWriter j;
      j.begin_object()
          .field("model", opts->model)
          .field("target", target_name)
          .field("reference", "ref")
          .field("rtol", opts->rtol)
          .field("atol", opts->atol);
      j.key("outputs").begin_array();
      for (size_t i = 0; i < errors.size(); ++i) {
        j.begin_object()
            .field("name", outputs[i]->name())
            .field("max_abs_err", errors[i].max_abs)
            .field("max_rel_err", errors[i].max_rel)
            .field("max_err_over_bound", errors[i].over_bound)
            .field("within", errors[i].within);
        if (!errors[i].problem.empty()) j.field("problem", errors[i].problem);
        j.end_object();
      }
      j.end_array().field("agree", all_ok).end_object();
      fmt::print("{}", j.str());
      return all_ok ? 0 : 1;
    }
    fmt::print("{:<32} {:>12} {:>12}  {}\n", "output", "max abs err", "max rel err", "verdict");
    for (size_t i = 0; i < errors.size(); ++i) {
      const Error& e = errors[i];
      fmt::print("{:<32} {:>12.3g} {:>12.3g}  {}{}\n", outputs[i]->name(), e.max_abs, e.max_rel,
                 e.within ? "ok" : "MISMATCH", e.problem.empty() ? "" : ": " + e.problem);
    }
    fmt::print("{} vs ref: {}\n", target_name, all_ok ? "all outputs agree" : "outputs differ");
    return all_ok ? 0 : 1;
  };
}

}  // namespace kiln::tools
