// SPDX-License-Identifier: Apache-2.0
// `kiln compile`: import an ONNX model, optimize it for a target and write a .kiln artifact.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/checksum.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "core/mapped_file.h"
#include "tools/command.h"
#include "tools/json_writer.h"
#include "tools/model_io.h"
#include "tools/quantize_flags.h"
#include "tools/target_option.h"

namespace kiln::tools {

namespace {

struct Options {
  std::string model;
  std::string output;
  TargetOption target;
  bool json = false;
  std::vector<std::string> input_shapes;
  int64_t batch = 0;
  uint64_t seed = 0;
  QuantizeFlags quantize;
};

// The input shapes to import with: --input-shape as given, and with --batch N every other input's
// first dim set to N (its other dims must be known).
Result<std::map<std::string, std::vector<int64_t>>> import_shapes(std::span<const uint8_t> bytes,
                                                                  const Options& opts) {
  KILN_ASSIGN_OR_RETURN(auto shapes, parse_input_shapes(opts.input_shapes));
  if (opts.batch <= 0) return shapes;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<compiler::Model> declared,
                        compiler::import_onnx_bytes(bytes, {}, opts.model));
  for (const compiler::Value* in : declared->graph->inputs()) {
    if (shapes.count(in->name()) || !in->type().is_tensor()) continue;
    const compiler::TensorType& type = in->tensor_type();
    if (type.rank() < 1) continue;
    std::vector<int64_t> dims;
    for (int d = 0; d < type.rank(); ++d) {
      const compiler::Dim& dim = (*type.dims)[static_cast<size_t>(d)];
      if (d > 0 && !dim.known()) {
        return invalid_argument_error(fmt::format(
            "--batch {}: input \"{}\" is {}, whose dim {} is dynamic too; give its whole shape "
            "with --input-shape {}=DIMS",
            opts.batch, in->name(), type.to_string(), d, in->name()));
      }
      dims.push_back(d == 0 ? opts.batch : dim.value);
    }
    shapes[in->name()] = std::move(dims);
  }
  return shapes;
}

int run_compile(const Options& opts) {
  using ms = std::chrono::duration<double, std::milli>;
  auto start = std::chrono::steady_clock::now();
  auto resolved = resolve_target(opts.target);
  if (!resolved.ok()) return report_error(resolved.status());
  const std::string& target_name = resolved->name;
  // Fail before a long compile when the artifact cannot be written.
  const std::filesystem::path folder = std::filesystem::path(opts.output).parent_path();
  std::error_code ec;
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    return report_error(not_found_error(fmt::format(
        "-o {}: the folder \"{}\" does not exist; create it first", opts.output, folder.string())));
  }
  if (compiler::is_artifact_file(opts.model)) {
    return report_error(invalid_argument_error(
        fmt::format("{} is already a compiled artifact; compile the .onnx model it was made from "
                    "(kiln print {} shows its recompile command)",
                    opts.model, opts.model)));
  }
  compiler::ImportOptions import;
  compiler::ArtifactSource source;
  {
    // The model file's size and hash (for the header) are taken from a mapping whose pages then
    // leave resident memory; importing maps it again and unmaps it before building the graph, so
    // the file is never resident beside the parsed model and its tensors (peak RSS).
    auto file = MappedFile::open(opts.model);
    if (!file.ok()) return report_error(file.status());
    const std::span<const uint8_t> model_bytes = (*file)->bytes();
    auto shapes = import_shapes(model_bytes, opts);
    if (!shapes.ok()) return report_error(shapes.status());
    import.input_shapes = std::move(shapes).value();
    source.size = model_bytes.size();
    source.hash = compiler::xxhash64(model_bytes);
    release_file_pages(model_bytes);
  }
  import.external_data_dir = std::filesystem::path(opts.model).parent_path().string();
  auto model = compiler::import_onnx_file(opts.model, import);
  if (!model.ok()) return report_error(model.status());
  auto imported = std::chrono::steady_clock::now();

  auto target = compiler::make_target(target_name);
  if (!target.ok()) return report_error(target.status());
  compiler::CompileOptions options;
  options.seed = opts.seed;
  std::shared_ptr<compiler::Graph> graph(std::move((*model)->graph));
  Status quantized = apply_quantization(*graph, opts.quantize, **target);
  if (!quantized.ok()) return report_error(quantized);
  auto exe = compiler::compile(std::move(graph), **target, options);
  if (!exe.ok()) return report_error(exe.status());
  auto compiled = std::chrono::steady_clock::now();

  source.name = std::filesystem::path(opts.model).filename().string();
  source.recompile_command = fmt::format("kiln compile {} --target {}", opts.model, target_name);
  for (const std::string& s : opts.input_shapes) {
    source.options.emplace_back("input_shape", s);
    source.recompile_command += " --input-shape " + s;
  }
  if (opts.batch > 0) {
    source.options.emplace_back("batch", std::to_string(opts.batch));
    source.recompile_command += fmt::format(" --batch {}", opts.batch);
  }
  if (opts.seed != 0) {
    source.options.emplace_back("seed", std::to_string(opts.seed));
    source.recompile_command += fmt::format(" --seed {}", opts.seed);
  }
  for (const auto& [flag, value] : opts.quantize.as_options()) {
    source.options.emplace_back(flag, value);
    source.recompile_command += value.empty() ? " --" + flag : fmt::format(" --{} {}", flag, value);
  }
  source.recompile_command += " -o " + opts.output;
  Status saved = compiler::save_artifact(opts.output, **exe, options, source);
  if (!saved.ok()) return report_error(saved);
  auto written = std::chrono::steady_clock::now();

  const auto size = std::filesystem::file_size(opts.output, ec);
  if (opts.json) {
    JsonWriter j;
    j.begin_object()
        .field("model", opts.model)
        .field("output", opts.output)
        .field("bytes", ec ? uint64_t{0} : static_cast<uint64_t>(size))
        .field("target", target_name)
        .field("precision", opts.quantize.describe())
        .field("import_ms", ms(imported - start).count())
        .field("compile_ms", ms(compiled - imported).count())
        .field("write_ms", ms(written - compiled).count())
        .field("recompile_command", source.recompile_command);
    j.key("inputs").begin_array();
    for (const compiler::Value* in : (*exe)->graph().inputs()) {
      j.begin_object().field("name", in->name()).field("type", in->type().to_string()).end_object();
    }
    j.end_array().key("outputs").begin_array();
    for (const compiler::Value* out : (*exe)->graph().outputs()) {
      j.begin_object()
          .field("name", out->name())
          .field("type", out->type().to_string())
          .end_object();
    }
    j.end_array().end_object();
    fmt::print("{}", j.str());
    return 0;
  }
  fmt::print(
      "wrote {} ({} bytes) for target {} in {}: imported in {:.1f} ms, compiled in {:.1f} ms, "
      "written in {:.1f} ms\n",
      opts.output, ec ? 0 : size, target_name, opts.quantize.describe(),
      ms(imported - start).count(), ms(compiled - imported).count(),
      ms(written - compiled).count());
  return 0;
}

}  // namespace

CommandAction add_compile_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Compile an ONNX model for a target into a .kiln artifact that loads in ms");
  cmd->add_option("model", opts->model, "the .onnx model")->required();
  cmd->add_option("-o,--output", opts->output, "the artifact to write, e.g. model.kiln")
      ->required();
  add_target_option(cmd, &opts->target, "the target to compile for");
  cmd->add_flag("--json", opts->json,
                "print one JSON object (the artifact, its size, target, timings, inputs and "
                "outputs) instead of the line");
  cmd->add_option("--input-shape", opts->input_shapes,
                  "NAME=1,3,224,224 (or 1x3x224x224): fix a dynamic input's shape");
  cmd->add_option("--batch", opts->batch,
                  "set the first dim of every input not given by --input-shape")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "seed of random ops (stored in the artifact)")
      ->capture_default_str();
  add_quantize_flags(cmd, &opts->quantize, true);
  return [opts] { return run_compile(*opts); };
}

}  // namespace kiln::tools
