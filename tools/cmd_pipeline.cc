// SPDX-License-Identifier: Apache-2.0
// `kiln pipeline run|bench`: runs a JSON data pipeline over an image folder, or measures it.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <variant>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/executor/batch_grid.h"
#include "pipeline/json/pipeline_json.h"
#include "pipeline/readers/file_reader.h"
#include "tools/command.h"
#include "tools/json_writer.h"
#include "tools/version.h"

namespace kiln::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct PipelineFlags {
  std::string pipeline_path;
  std::string images;
  int64_t batch = 0;     // 0: the JSON's (or 32)
  int threads = -1;      // -1: the JSON's (or every core)
  int64_t prefetch = 0;  // 0: the JSON's (or 2)
  int64_t epochs = 1;
  int64_t seed = -1;  // -1: the JSON's
  std::string save_grid;
  std::string json_out;  // bench: the JSON file, "-" for stdout only
  bool json = false;     // run, ops: one JSON object on stdout instead of the text
  bool decode_only = false;
  bool keep_on_gpu = false;  // bench: GPU outputs stay on the device, as a training step takes them
};

void add_common_options(CLI::App* cmd, PipelineFlags* f, bool pipeline_required) {
  auto* file = cmd->add_option("pipeline", f->pipeline_path,
                               "pipeline JSON (rocAL's {\"pipeline\": [...]} or kiln's "
                               "{\"operators\": [...]})");
  if (pipeline_required) file->required();
  cmd->add_option("--images", f->images,
                  "folder of images, one sub-folder per class (sets readers.file's file_root; "
                  "without it the JSON's reader arguments are used as they are)");
  cmd->add_option("--batch", f->batch, "batch size (default: the JSON's, else 32)");
  cmd->add_option("--threads", f->threads, "decode/augment threads (default: every core)");
  cmd->add_option("--prefetch", f->prefetch, "prefetch queue depth (default: the JSON's, else 2)");
  cmd->add_option("--seed", f->seed, "pipeline seed (default: the JSON's, else 0)");
}

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// The JSON pipeline with the command-line flags applied: --images becomes the reader's file_root.
Result<pipeline::PipelineSpec> load_spec(const PipelineFlags& f) {
  if (!f.images.empty() && !std::filesystem::is_directory(f.images)) {
    return not_found_error(fmt::format(
        "--images \"{}\" is not a folder (expected one sub-folder of images per class)", f.images));
  }
  KILN_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec, pipeline::load_pipeline_json(f.pipeline_path));
  pipeline::OpSpec& reader = spec.ops.front();
  if (!f.images.empty()) {
    if (reader.op != "readers.file") {
      return invalid_argument_error(
          fmt::format("pipeline \"{}\": --images needs a readers.file first operator, found {}",
                      f.pipeline_path, reader.op));
    }
    reader.args["file_root"] = f.images;
  } else if (spec.format == "rocal") {
    return invalid_argument_error(fmt::format(
        "pipeline \"{}\" is in rocAL's format, which names no images: pass --images DIR",
        f.pipeline_path));
  }
  pipeline::PipelineOptions& o = spec.options;
  if (spec.format == "rocal") {
    o.batch_size = 32;
    o.num_threads = 0;
  }
  if (f.batch > 0) o.batch_size = f.batch;
  if (f.threads >= 0) o.num_threads = f.threads;
  if (f.prefetch > 0) o.prefetch_queue_depth = f.prefetch;
  if (f.seed >= 0) o.seed = static_cast<uint64_t>(f.seed);
  return spec;
}

std::string describe(const pipeline::TensorList& list) {
  if (list.dense.defined()) {
    return fmt::format("{} {}", dtype_name(list.dense.dtype()), list.dense.shape().to_string());
  }
  return fmt::format(
      "ragged {} x {}", list.samples.size(),
      list.samples.empty() ? std::string("?") : list.samples[0].shape().to_string() + "...");
}

// The index of the first output whose samples are images (rank 3), else -1.
int image_output(const pipeline::Batch& batch) {
  for (size_t k = 0; k < batch.outputs.size(); ++k) {
    const auto& s = batch.outputs[k].samples;
    if (!s.empty() && s[0].rank() == 3) return static_cast<int>(k);
  }
  return -1;
}

void print_stages(const std::vector<pipeline::StageTiming>& stages, int64_t images) {
  fmt::print("{:<36} {:>8} {:>10} {:>12}\n", "stage", "calls", "total s", "ms / image");
  for (const auto& s : stages) {
    fmt::print("{:<36} {:>8} {:>10.3f} {:>12.3f}\n", s.stage, s.calls, s.seconds,
               images > 0 ? s.seconds * 1e3 / static_cast<double>(images) : 0.0);
  }
}

// One output of a batch as JSON: its name, dtype and shape, or the shapes of ragged samples.
void tensor_list_json(JsonWriter& j, const std::string& name, const pipeline::TensorList& list) {
  j.begin_object().field("name", name);
  if (list.dense.defined()) {
    j.field("dtype", std::string(dtype_name(list.dense.dtype())))
        .field("shape", list.dense.shape().dims());
  } else {
    if (!list.samples.empty()) j.field("dtype", std::string(dtype_name(list.samples[0].dtype())));
    j.key("sample_shapes").begin_array();
    for (const Tensor& t : list.samples) j.value(t.shape().dims());
    j.end_array();
  }
  j.end_object();
}

int run_pipeline(const PipelineFlags& f) {
  Result<pipeline::PipelineSpec> spec = load_spec(f);
  if (!spec.ok()) return report_error(spec.status());
  auto p = pipeline::Pipeline::create(spec->options, spec->ops);
  if (!p.ok()) return report_error(p.status());
  int64_t images = 0, batches = 0;
  bool grid_saved = f.save_grid.empty();
  JsonWriter j;
  j.begin_object()
      .field("pipeline", f.pipeline_path)
      .field("images_dir", f.images)
      .field("batch_size", spec->options.batch_size)
      .field("epochs", f.epochs)
      .key("batches")
      .begin_array();
  auto start = Clock::now();
  for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
    if (epoch > 0) (*p)->reset();
    while (true) {
      auto batch = (*p)->run();
      if (!batch.ok()) return report_error(batch.status());
      if (!*batch) break;
      const pipeline::Batch& b = **batch;
      if (f.json) {
        j.begin_object()
            .field("epoch", b.epoch)
            .field("batch", batches)
            .field("samples", b.paths.size())
            .field("padded", b.num_padded)
            .field("paths", b.paths);
        j.key("outputs").begin_array();
        for (size_t k = 0; k < b.outputs.size(); ++k) {
          tensor_list_json(j, spec->options.outputs[k], b.outputs[k]);
        }
        j.end_array().end_object();
      } else {
        std::vector<std::string> outs;
        for (size_t k = 0; k < b.outputs.size(); ++k) {
          outs.push_back(fmt::format("{} {}", spec->options.outputs[k], describe(b.outputs[k])));
        }
        fmt::print("epoch {} batch {}: {} samples; {}\n", b.epoch, batches, b.paths.size(),
                   fmt::join(outs, "; "));
      }
      images += static_cast<int64_t>(b.paths.size()) - b.num_padded;
      ++batches;
      if (!grid_saved) {
        int k = image_output(b);
        if (k < 0) {
          return report_error(invalid_argument_error(
              "--save-grid: the pipeline has no image output (rank-3 samples) to draw"));
        }
        Status s = pipeline::save_batch_grid(b.outputs[static_cast<size_t>(k)], f.save_grid);
        if (!s.ok()) return report_error(s);
        if (!f.json) {
          fmt::print("wrote the first batch's \"{}\" as a grid to {}\n",
                     spec->options.outputs[static_cast<size_t>(k)], f.save_grid);
        }
        grid_saved = true;
      }
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto bad = (*p)->bad_samples();
  if (f.json) {
    j.end_array()
        .field("images", images)
        .field("batch_count", batches)
        .field("seconds", seconds)
        .field("images_per_s", static_cast<double>(images) / seconds);
    j.key("bad_samples").begin_array();
    for (const auto& b : bad)
      j.begin_object().field("path", b.path).field("reason", b.reason).end_object();
    j.end_array().key("grid");
    if (f.save_grid.empty()) {
      j.null();
    } else {
      j.value(f.save_grid);
    }
    j.end_object();
    fmt::print("{}", j.str());
    return 0;
  }
  fmt::print("{} images in {} batches, {:.3f} s, {:.1f} images/s; {} bad samples skipped\n", images,
             batches, seconds, static_cast<double>(images) / seconds, bad.size());
  for (const auto& b : bad) fmt::print("  skipped \"{}\": {}\n", b.path, b.reason);
  return 0;
}

// User + system CPU time of every thread of this process.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(usage.ru_utime) + sec(usage.ru_stime);
}

struct EpochResult {
  int64_t images = 0;
  double seconds = 0.0;
  double cpu_seconds = 0.0;
  double images_per_s() const { return seconds > 0 ? static_cast<double>(images) / seconds : 0; }
};

Status write_json(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.good()) return errno_error(errno, fmt::format("cannot write \"{}\"", path));
  return Status();
}

// Full-scale TurboJPEG decode of every file on `threads` threads, files held in memory.
Result<std::vector<EpochResult>> decode_ceiling(const PipelineFlags& f, int threads) {
  if (f.images.empty()) {
    return invalid_argument_error("pipeline bench --decode-only: pass --images DIR");
  }
  pipeline::FileReaderOptions ro;
  ro.file_root = f.images;
  KILN_ASSIGN_OR_RETURN(pipeline::FileReader reader, pipeline::FileReader::open(ro));
  std::vector<std::shared_ptr<const MappedFile>> files;
  for (const auto& e : reader.entries()) {
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(e.path));
    files.push_back(std::move(file));
  }
  ThreadPool pool(threads);
  std::vector<EpochResult> epochs;
  for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
    std::atomic<int64_t> decoded{0};
    auto start = Clock::now();
    const double cpu_start = cpu_seconds();
    pool.parallel_for(static_cast<int64_t>(files.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        auto image = pipeline::decode_image(files[i]->bytes(), files[i]->path(), {});
        if (image.ok()) decoded++;
      }
    });
    epochs.push_back({decoded.load(), std::chrono::duration<double>(Clock::now() - start).count(),
                      cpu_seconds() - cpu_start});
  }
  return epochs;
}

int bench_pipeline(const PipelineFlags& f) {
  const int threads = f.threads > 0 ? f.threads : default_thread_count();
  std::vector<EpochResult> epochs;
  std::vector<pipeline::StageTiming> stages;
  int64_t batch_size = 0, prefetch = 0;
  if (f.decode_only) {
    auto r = decode_ceiling(f, threads);
    if (!r.ok()) return report_error(r.status());
    epochs = std::move(*r);
  } else {
    if (f.pipeline_path.empty()) {
      return report_error(
          invalid_argument_error("pipeline bench: give a pipeline JSON file, or "
                                 "--decode-only"));
    }
    Result<pipeline::PipelineSpec> spec = load_spec(f);
    if (!spec.ok()) return report_error(spec.status());
    spec->options.num_threads = threads;
    spec->options.gpu_outputs_on_device = f.keep_on_gpu;
    batch_size = spec->options.batch_size;
    prefetch = spec->options.prefetch_queue_depth;
    auto p = pipeline::Pipeline::create(spec->options, spec->ops);
    if (!p.ok()) return report_error(p.status());
    for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
      if (epoch > 0) (*p)->reset();
      EpochResult e;
      auto start = Clock::now();
      const double cpu_start = cpu_seconds();
      while (true) {
        auto batch = (*p)->run();
        if (!batch.ok()) return report_error(batch.status());
        if (!*batch) break;
        e.images += static_cast<int64_t>((*batch)->paths.size()) - (*batch)->num_padded;
      }
      e.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      e.cpu_seconds = cpu_seconds() - cpu_start;
      epochs.push_back(e);
    }
    stages = (*p)->stage_timings();
  }
  // The first epoch warms the page cache and the allocator; later ones are the figure.
  std::vector<double> warm;
  for (size_t i = epochs.size() > 1 ? 1 : 0; i < epochs.size(); ++i) {
    warm.push_back(epochs[i].images_per_s());
  }
  std::sort(warm.begin(), warm.end());
  const double median = warm[warm.size() / 2];
  const int64_t rss = peak_rss_bytes();
  const bool json_only = f.json_out == "-";
  if (!json_only) {
    for (size_t i = 0; i < epochs.size(); ++i) {
      fmt::print("epoch {}: {} images, {:.3f} s, {:.1f} images/s, {:.2f} CPU s{}\n", i,
                 epochs[i].images, epochs[i].seconds, epochs[i].images_per_s(),
                 epochs[i].cpu_seconds, i == 0 && epochs.size() > 1 ? " (warm-up)" : "");
    }
    fmt::print("{}: {:.1f} images/s (median of warm epochs), {} threads, peak RSS {:.1f} MB\n",
               f.decode_only ? "decode-only ceiling" : "pipeline", median, threads,
               static_cast<double>(rss) / 1e6);
    int64_t total_images = 0;
    for (const auto& e : epochs) total_images += e.images;
    if (!stages.empty()) print_stages(stages, total_images);
  }
  if (!f.json_out.empty()) {
    JsonWriter j;
    j.begin_object()
        .field("tool", "kiln pipeline bench")
        .field("version", KILN_VERSION_STRING)
        .field("mode", f.decode_only ? "decode_only" : "pipeline")
        .field("pipeline", f.pipeline_path)
        .field("images_dir", f.images)
        .field("threads", threads)
        .field("batch_size", batch_size)
        .field("prefetch_queue_depth", prefetch)
        .field("gpu_outputs_on_device", f.keep_on_gpu)
        .field("images_per_s", median)
        .field("peak_rss_bytes", rss);
    j.key("epochs").begin_array();
    for (const auto& e : epochs) {
      j.begin_object()
          .field("images", e.images)
          .field("seconds", e.seconds)
          .field("cpu_seconds", e.cpu_seconds)
          .end_object();
    }
    j.end_array().key("stages").begin_array();
    for (const auto& s : stages) {
      j.begin_object()
          .field("stage", s.stage)
          .field("calls", s.calls)
          .field("seconds", s.seconds)
          .end_object();
    }
    j.end_array().end_object();
    if (json_only) {
      fmt::print("{}", j.str());
    } else {
      Status s = write_json(f.json_out, j.str());
      if (!s.ok()) return report_error(s);
    }
  }
  return 0;
}

// An argument's default as its JSON value.
void arg_value_json(JsonWriter& j, const pipeline::ArgValue& v) {
  std::visit([&](const auto& x) { j.value(x); }, v);
}

bool has_gpu_form(std::string_view name) {
  auto names = pipeline::gpu_operator_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

int list_operators(bool json) {
  if (json) {
    JsonWriter j;
    j.begin_object().key("operators").begin_array();
    for (const pipeline::OperatorSchema* schema : pipeline::operator_schemas()) {
      j.begin_object()
          .field("name", schema->name)
          .field("doc", schema->doc)
          .field("inputs", schema->inputs)
          .field("outputs", schema->outputs)
          .field("gpu", has_gpu_form(schema->name));
      j.key("args").begin_array();
      for (const pipeline::ArgSpec& arg : schema->args) {
        j.begin_object()
            .field("name", arg.name)
            .field("type", std::string(pipeline::arg_type_name(arg.type)))
            .field("required", !arg.default_value.has_value())
            .key("default");
        if (arg.default_value) {
          arg_value_json(j, *arg.default_value);
        } else {
          j.null();
        }
        j.field("per_sample", arg.per_sample).field("doc", arg.doc).end_object();
      }
      j.end_array().end_object();
    }
    j.end_array().end_object();
    fmt::print("{}", j.str());
    return 0;
  }
  for (const pipeline::OperatorSchema* schema : pipeline::operator_schemas()) {
    fmt::print("{}({}) -> ({}): {}{}\n", schema->name, fmt::join(schema->inputs, ", "),
               fmt::join(schema->outputs, ", "), schema->doc,
               has_gpu_form(schema->name) ? " [device cpu or gpu]" : "");
    for (const pipeline::ArgSpec& arg : schema->args) {
      fmt::print("    {:<22} {:<30} {}{}\n", arg.name,
                 arg.default_value ? pipeline::arg_value_to_string(*arg.default_value)
                                   : std::string("(required)"),
                 arg.doc, arg.per_sample ? " [per-sample]" : "");
    }
  }
  return 0;
}

}  // namespace

CommandAction add_pipeline_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("pipeline", "Run or measure a data pipeline over an image folder");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<PipelineFlags>();
  auto* run = cmd->add_subcommand("run", "Run a JSON pipeline and print every batch");
  add_common_options(run, flags.get(), true);
  run->add_option("--epochs", flags->epochs, "epochs to run (default 1)");
  run->add_option("--save-grid", flags->save_grid, "write the first batch as a PNG grid");
  run->add_flag("--json", flags->json,
                "print one JSON object (every batch's samples, paths and output shapes, the "
                "totals, bad samples) instead of the lines");
  auto* bench = cmd->add_subcommand("bench", "Measure a JSON pipeline: images/s, stage times");
  add_common_options(bench, flags.get(), false);
  flags->epochs = 1;
  bench->add_option("--epochs", flags->epochs,
                    "epochs; the first is a warm-up when there are several (bench default 3)");
  bench
      ->add_option("--json", flags->json_out,
                   "write the figures as JSON to this file, or with no file (or -) print only "
                   "the JSON object")
      ->expected(0, 1)
      ->default_str("-");
  bench->add_flag("--decode-only", flags->decode_only,
                  "instead: decode every image at full scale on all threads (the ceiling)");
  bench->add_flag("--keep-on-gpu", flags->keep_on_gpu,
                  "outputs of device \"gpu\" operators stay in GPU memory (as a training or "
                  "inference step on the GPU takes them) instead of being copied back");
  auto* ops = cmd->add_subcommand("ops", "List the pipeline operators with their arguments");
  ops->add_flag("--json", flags->json,
                "print one JSON object: each operator's inputs, outputs and arguments (type, "
                "default, per-sample)");
  return [flags, run, bench, ops] {
    if (ops->parsed()) return list_operators(flags->json);
    if (bench->parsed()) {
      if (bench->count("--epochs") == 0) flags->epochs = 3;
      if (flags->epochs < 1) return report_error(invalid_argument_error("--epochs must be >= 1"));
      return bench_pipeline(*flags);
    }
    if (flags->epochs < 1) return report_error(invalid_argument_error("--epochs must be >= 1"));
    (void)run;
    return run_pipeline(*flags);
  };
}

}  // namespace kiln::tools
