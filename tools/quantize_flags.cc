// SPDX-License-Identifier: Apache-2.0
// Quantization flags and input folders for the CLI.
#include "tools/quantize_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/cache/input_folder.h"
#include "core/progress.h"
#include "pipeline/executor/pipeline.h"
#include "pipeline/json/pipeline_json.h"

namespace kiln::tools {

namespace fs = std::filesystem;

std::string QuantizeFlags::describe() const {
  if (fp16) return "fp16";
  if (bf16) return "bf16";
  if (int8) return fmt::format("int8 ({})", method);
  return "fp32";
}

std::vector<std::pair<std::string, std::string>> QuantizeFlags::as_options() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (fp16) out.emplace_back("fp16", "");
  if (bf16) out.emplace_back("bf16", "");
  if (int8) {
    out.emplace_back("int8", "");
    out.emplace_back("calibration", calibration);
    if (!pipeline.empty()) out.emplace_back("calibration-pipeline", pipeline);
    out.emplace_back("calibration-method", method);
    if (method == "percentile") out.emplace_back("percentile", fmt::format("{}", percentile));
    for (const std::string& e : exclude) out.emplace_back("int8-exclude", e);
  }
  for (const std::string& op : ops) out.emplace_back("quantize-ops", op);
  return out;
}

uint64_t QuantizeFlags::data_hash() const {
  if (!int8 || calibration.empty()) return 0;
  std::vector<fs::path> extra;
  if (!pipeline.empty()) extra.emplace_back(pipeline);
  return compiler::hash_input_folder(calibration, extra);
}

void add_quantize_flags(CLI::App* cmd, QuantizeFlags* flags, bool with_int8) {
  CLI::Option* fp16 = cmd->add_flag(
      "--fp16", flags->fp16, "convert compute ops to fp16 (softmax, norms, reductions stay fp32)");
  CLI::Option* bf16 = cmd->add_flag(
      "--bf16", flags->bf16, "convert compute ops to bf16 (softmax, norms, reductions stay fp32)");
  fp16->excludes(bf16);
  cmd->add_option("--quantize-ops", flags->ops,
                  "ONNX ops to quantize (default: Conv/MatMul/Gemm for int8, compute ops for "
                  "fp16/bf16)")
      ->delimiter(',');
  if (!with_int8) return;
  CLI::Option* int8 = cmd->add_flag(
      "--int8", flags->int8,
      "int8 post-training quantization (QDQ form) calibrated on --calibration inputs");
  int8->excludes(fp16)->excludes(bf16);
  cmd->add_option("--calibration", flags->calibration,
                  "calibration inputs: a folder of .npy files (or of sub-folders of "
                  "<input>.npy), or of images with --calibration-pipeline");
  cmd->add_option("--calibration-pipeline", flags->pipeline,
                  "pipeline JSON that turns the --calibration images into model inputs");
  cmd->add_option("--calibration-method", flags->method, "max, percentile or entropy")
      ->check(CLI::IsMember({"max", "percentile", "entropy"}))
      ->capture_default_str();
  cmd->add_option("--percentile", flags->percentile,
                  "with --calibration-method percentile: the percentile of |x| kept")
      ->capture_default_str();
  cmd->add_option("--int8-exclude", flags->exclude,
                  "nodes to keep in float with --int8: node names or op names (Add, MaxPool, ...)")
      ->delimiter(',');
}

namespace {

Result<std::vector<InputBatch>> load_npy_folder(const fs::path& dir, const compiler::Graph& graph) {
  KILN_ASSIGN_OR_RETURN(std::vector<compiler::FolderBatch> read,
                        compiler::read_npy_folder(dir, graph));
  std::vector<InputBatch> batches;
  for (compiler::FolderBatch& r : read) {
    InputBatch b;
    b.tensors = std::move(r.tensors);
    b.source = std::move(r.source);
    batches.push_back(std::move(b));
  }
  return batches;
}

// Stacks equal-shaped samples into one [n, ...] tensor.
Result<Tensor> dense_batch(const pipeline::TensorList& list, const std::string& pipeline_json) {
  if (list.dense.defined()) return list.dense;
  if (list.samples.empty()) return Tensor();
  const Tensor& first = list.samples[0];
  std::vector<int64_t> dims = {static_cast<int64_t>(list.samples.size())};
  for (int64_t d : first.shape()) dims.push_back(d);
  Tensor out(first.dtype(), Shape(dims));
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const Tensor& s : list.samples) {
    if (!(s.shape() == first.shape()) || s.dtype() != first.dtype()) {
      return invalid_argument_error(fmt::format(
          "pipeline \"{}\" gives samples of different shapes ({} and {}); end it with a resize "
          "or crop to the model's input size",
          pipeline_json, first.shape().to_string(), s.shape().to_string()));
    }
    std::memcpy(dst, s.raw_data(), s.nbytes());
    dst += s.nbytes();
  }
  return out;
}

Result<std::vector<InputBatch>> load_through_pipeline(const std::string& dir,
                                                      const std::string& pipeline_json,
                                                      const compiler::Graph& graph) {
  if (graph.inputs().size() != 1) {
    return invalid_argument_error(
        fmt::format("a pipeline feeds one model input; this model has {}", graph.inputs().size()));
  }
  KILN_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec, pipeline::load_pipeline_json(pipeline_json));
  if (spec.ops.empty() || spec.ops.front().op != "readers.file") {
    return invalid_argument_error(
        fmt::format("pipeline \"{}\": expected a readers.file first operator to read \"{}\"",
                    pipeline_json, dir));
  }
  spec.ops.front().args["file_root"] = dir;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::Pipeline> p,
                        pipeline::Pipeline::create(spec.options, spec.ops));
  int label_output = -1;
  for (size_t k = 0; k < spec.options.outputs.size(); ++k) {
    if (spec.options.outputs[k] == "labels" || spec.options.outputs[k] == "label") {
      label_output = static_cast<int>(k);
    }
  }
  std::vector<InputBatch> batches;
  while (true) {
    KILN_ASSIGN_OR_RETURN(std::optional<pipeline::Batch> batch, p->run());
    if (!batch) break;
    InputBatch b;
    KILN_ASSIGN_OR_RETURN(Tensor images, dense_batch(batch->outputs[0], pipeline_json));
    b.tensors.emplace(graph.inputs()[0]->name(), std::move(images));
    b.source = batch->paths.empty() ? fmt::format("batch {}", batches.size())
                                    : fs::path(batch->paths[0]).filename().string();
    if (label_output >= 0) {
      KILN_ASSIGN_OR_RETURN(
          Tensor labels,
          dense_batch(batch->outputs[static_cast<size_t>(label_output)], pipeline_json));
      visit_dtype(labels.dtype(), [&]<class T>() {
        if constexpr (std::is_integral_v<T>) {
          for (int64_t i = 0; i < labels.numel(); ++i) {
            b.labels.push_back(static_cast<int64_t>(labels.data<T>()[i]));
          }
        }
      });
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

}  // namespace

Result<std::vector<InputBatch>> load_input_folder(const std::string& dir,
                                                  const std::string& pipeline_json,
                                                  const compiler::Graph& graph) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return not_found_error(fmt::format("\"{}\" is not a folder of inputs", dir));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<InputBatch> batches,
                        pipeline_json.empty() ? load_npy_folder(dir, graph)
                                              : load_through_pipeline(dir, pipeline_json, graph));
  if (batches.empty()) {
    return not_found_error(fmt::format(
        "\"{}\" holds no inputs: expected .npy files, sub-folders of <input>.npy files, or "
        "images with a pipeline JSON",
        dir));
  }
  return batches;
}

Status attach_labels(const std::string& labels_file, std::vector<InputBatch>& batches) {
  std::ifstream in(labels_file);
  if (!in) return not_found_error(fmt::format("cannot read labels file \"{}\"", labels_file));
  std::map<std::string, std::vector<int64_t>> by_stem;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string file;
    if (!(fields >> file)) continue;
    std::vector<int64_t> labels;
    int64_t label = 0;
    while (fields >> label) labels.push_back(label);
    if (labels.empty()) {
      return invalid_argument_error(fmt::format(
          "labels file \"{}\": line \"{}\" has no label (expected FILE LABEL)", labels_file, line));
    }
    by_stem[fs::path(file).stem().string()] = std::move(labels);
  }
  for (InputBatch& b : batches) {
    auto found = by_stem.find(fs::path(b.source).stem().string());
    if (found == by_stem.end()) {
      return not_found_error(
          fmt::format("labels file \"{}\" has no line for \"{}\"", labels_file, b.source));
    }
    b.labels = found->second;
  }
  return Status();
}

Status apply_quantization(compiler::Graph& graph, const QuantizeFlags& flags,
                          const compiler::Target& target, compiler::Int8Report* report_out,
                          std::shared_ptr<const compiler::ObservedRanges> observed) {
  if (flags.fp16) return compiler::quantize_fp16(graph, flags.ops);
  if (flags.bf16) return compiler::quantize_bf16(graph, flags.ops);
  if (!flags.int8) {
    if (!flags.calibration.empty()) {
      return invalid_argument_error("--calibration is for --int8; add --int8 or drop it");
    }
    return Status();
  }
  if (flags.calibration.empty()) {
    return invalid_argument_error(
        "--int8 needs calibration inputs: pass --calibration DIR (a folder of .npy inputs, or of "
        "images with --calibration-pipeline P.json)");
  }
  compiler::Int8Options options;
  options.ops = flags.ops;
  options.exclude = flags.exclude;
  KILN_ASSIGN_OR_RETURN(options.method, compiler::parse_calibration_method(flags.method));
  options.percentile = flags.percentile;
  options.observed = std::move(observed);
  compiler::Int8Report report;
  bool done = false;
  if (options.observed) {
    // Without batches: quantize_int8 says (failed precondition) when a value needs calibrating.
    Result<compiler::Int8Report> known = compiler::quantize_int8(
        graph, target, 0,
        [](int64_t) -> Result<compiler::CalibrationBatch> {
          return internal_error("no calibration batch was expected");
        },
        options);
    if (known.ok()) {
      report = std::move(known).value();
      done = true;
    } else if (known.status().code() != StatusCode::kFailedPrecondition) {
      return known.status();
    }
  }
  if (!done) {
    KILN_ASSIGN_OR_RETURN(std::vector<InputBatch> batches,
                          load_input_folder(flags.calibration, flags.pipeline, graph));
    ProgressBar bar(fmt::format("calibrating ({})", flags.method));
    options.progress = bar.callback();
    std::vector<compiler::CalibrationBatch> tensors;
    for (InputBatch& b : batches) tensors.push_back(std::move(b.tensors));
    KILN_ASSIGN_OR_RETURN(report, compiler::quantize_int8(graph, target, tensors, options));
    fmt::print(stderr, "int8: {} nodes quantized, {} activation scales from {} batches\n",
               report.quantized_nodes, report.activations.size(), report.batches);
  }
  if (report_out != nullptr) *report_out = std::move(report);
  return Status();
}

}  // namespace kiln::tools
