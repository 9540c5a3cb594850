// SPDX-License-Identifier: Apache-2.0
// The compiler backend: imports the ONNX model, compiles it per batch size (cached as .kiln
// artifacts in the server's cache folder, never in the repository), and runs batches of requests
// joined along dim 0.
#include "server/backends/compiler_backend.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <map>
#include <mutex>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/checksum.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "core/logging.h"
#include "core/mapped_file.h"

namespace kiln::server {

namespace {

using compiler::Argument;
using compiler::Executable;

// Copies rows [0, rows) of `src` into `dst` starting at row `at` (both share all dims but the
// first).
void copy_rows(const Tensor& src, int64_t rows, Tensor& dst, int64_t at) {
  const int64_t row = src.shape().numel(1, src.rank());
  if (src.dtype() == DType::kString) {
    const std::string* s = src.data<std::string>();
    std::string* d = dst.data<std::string>() + at * row;
    for (int64_t i = 0; i < rows * row; ++i) d[i] = s[i];
    return;
  }
  const size_t bytes = static_cast<size_t>(row) * dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(at) * bytes, src.raw_data(),
              static_cast<size_t>(rows) * bytes);
}

// `name` with every character but letters, digits, '-' and '_' replaced by '-'.
std::string file_safe(std::string_view name) {
  std::string out;
  for (char c : name) {
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '-';
  }
  return out;
}

// "image-8x1x8x8" for every input (names made file-safe), or a hash when that gets long.
std::string shape_profile(const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::string profile;
  for (const auto& [name, dims] : shapes) {
    if (!profile.empty()) profile += '_';
    for (char c : name) profile += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    profile += fmt::format("-{}", fmt::join(dims, "x"));
  }
  if (profile.size() > 96) {
    profile = fmt::format("{:016x}",
                          compiler::xxhash64(std::span<const uint8_t>(
                              reinterpret_cast<const uint8_t*>(profile.data()), profile.size())));
  }
  return profile;
}

// A hash of the kiln version and this machine's fingerprint for `target`.
uint64_t fingerprint_hash(const std::string& target) {
  std::string text(compiler::kiln_version());
  for (const auto& [key, value] : compiler::device_fingerprint(target)) {
    text += fmt::format("\n{}={}", key, value);
  }
  return compiler::xxhash64(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Whether `exe`'s inputs have exactly `shapes`; the error says the first that differs.
Status check_input_shapes(const Executable& exe,
                          const std::map<std::string, std::vector<int64_t>>& shapes) {
  for (const compiler::Value* in : exe.graph().inputs()) {
    auto it = shapes.find(in->name());
    if (it == shapes.end() || !in->type().is_tensor() || !in->tensor_type().has_rank()) {
      return invalid_argument_error(
          fmt::format("input \"{}\" is not one the model has", in->name()));
    }
    std::vector<int64_t> dims;
    for (const compiler::Dim& d : *in->tensor_type().dims) dims.push_back(d.value);
    if (dims != it->second) {
      return invalid_argument_error(fmt::format("input \"{}\" has shape [{}], expected [{}]",
                                                in->name(), fmt::join(dims, ","),
                                                fmt::join(it->second, ",")));
    }
  }
  return Status();
}

Result<Tensor> slice_rows(const Tensor& src, int64_t begin, int64_t rows) {
  Shape shape = src.shape();
  shape[0] = rows;
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(src.dtype(), shape));
  const int64_t row = src.shape().numel(1, src.rank());
  if (src.dtype() == DType::kString) {
    const std::string* s = src.data<std::string>() + begin * row;
    std::string* d = out.data<std::string>();
    for (int64_t i = 0; i < rows * row; ++i) d[i] = s[i];
  } else {
    const size_t bytes = static_cast<size_t>(row) * dtype_size(src.dtype());
    std::memcpy(out.raw_data(),
                static_cast<const char*>(src.raw_data()) + static_cast<size_t>(begin) * bytes,
                static_cast<size_t>(rows) * bytes);
  }
  return out;
}

class CompilerBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& ctx) override {
    name_ = ctx.config.name;
    const Parameters& p = ctx.config.parameters;
    KILN_ASSIGN_OR_RETURN(path_, find_model_file(ctx, ".onnx"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> target, p.get_string("target"));
    target_name_ = target.value_or("cpu");
    KILN_ASSIGN_OR_RETURN(auto target_or, compiler::make_target(target_name_));
    target_ = std::move(target_or);
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> batch, p.get_int("batch"));
    if (!batch) {
      KILN_ASSIGN_OR_RETURN(batch, p.get_int("batch_size"));
    }
    KILN_ASSIGN_OR_RETURN(std::optional<bool> pad, p.get_bool("pad_batch"));
    pad_batch_ = pad.value_or(true);
    KILN_ASSIGN_OR_RETURN(std::optional<bool> cache, p.get_bool("cache"));
    // The cache lives outside the repository (which may be read-only, and is never written):
    // <cache_dir>/<model>-<hash of the model file's path>/, so models of one name in different
    // repositories keep apart.
    cache_ = cache.value_or(true) && !ctx.cache_dir.empty();
    if (cache_) {
      fingerprint_hash_ = fingerprint_hash(target_name_);
      std::error_code ec;
      const std::string where = std::filesystem::weakly_canonical(path_, ec).string();
      cache_dir_ = ctx.cache_dir /
                   fmt::format("{}-{:016x}", file_safe(name_),
                               compiler::xxhash64(std::span<const uint8_t>(
                                   reinterpret_cast<const uint8_t*>(where.data()), where.size())));
    }

    // A first import tells which inputs carry a dynamic batch dim.
    KILN_ASSIGN_OR_RETURN(auto probe, compiler::import_onnx_file(path_.string()));
    batching_ = !probe->graph->inputs().empty();
    for (const compiler::Value* in : probe->graph->inputs()) {
      if (!in->type().is_tensor() || !in->tensor_type().has_rank()) {
        return unimplemented_error(
            fmt::format("model \"{}\": input \"{}\" is a {}; the compiler "
                        "backend serves tensors of known rank",
                        name_, in->name(), in->type().to_string()));
      }
      const auto& dims = *in->tensor_type().dims;
      if (dims.empty() || dims[0].known()) batching_ = false;
      input_names_.push_back(in->name());
    }
    // Non-batch dims left dynamic take their value from config.toml's [[inputs]] shape.
    for (const compiler::Value* in : probe->graph->inputs()) {
      const auto& dims = *in->tensor_type().dims;
      const TensorMetadata* declared = nullptr;
      for (const TensorMetadata& t : ctx.config.inputs) {
        if (t.name == in->name()) declared = &t;
      }
      std::vector<int64_t> fixed;
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t v = dims[i].value;
        if (!dims[i].known() && !(batching_ && i == 0)) {
          if (declared == nullptr || declared->shape.size() != dims.size() ||
              declared->shape[i] < 0) {
            return invalid_argument_error(fmt::format(
                "model \"{}\": input \"{}\" has dynamic dim {} ({}); give its size in config.toml "
                "[[inputs]] shape",
                name_, in->name(), i, in->tensor_type().to_string()));
          }
          v = declared->shape[i];
        }
        fixed.push_back(v);
      }
      fixed_dims_[in->name()] = fixed;
    }
    batch_ =
        batching_ ? batch.value_or(std::max<int64_t>(1, ctx.config.batching.max_batch_size)) : 1;
    if (batch_ < 1) {
      return invalid_argument_error(
          fmt::format("model \"{}\": parameter batch must be at least 1, got {}", name_, batch_));
    }

    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, executable(batch_));
    BackendInfo info;
    info.platform = "onnx_onnxv1";
    info.max_batch_size = batching_ ? batch_ : 0;
    const compiler::Graph& g = exe->graph();
    for (const compiler::Value* in : probe->graph->inputs()) {
      std::vector<int64_t> shape = fixed_dims_[in->name()];
      if (batching_) shape[0] = -1;
      info.inputs.push_back({in->name(), in->tensor_type().dtype, shape});
    }
    for (const compiler::Value* out : g.outputs()) {
      if (!out->type().is_tensor() || !out->tensor_type().has_rank()) {
        return unimplemented_error(
            fmt::format("model \"{}\": output \"{}\" is a {}; the compiler backend serves tensors",
                        name_, out->name(), out->type().to_string()));
      }
      std::vector<int64_t> shape;
      for (const compiler::Dim& d : *out->tensor_type().dims) shape.push_back(d.value);
      if (batching_) {
        if (shape.empty() || (shape[0] != batch_ && shape[0] != -1)) {
          return unimplemented_error(fmt::format(
              "model \"{}\": output \"{}\" {} does not start with the batch dim, so requests "
              "cannot be batched; give the model a fixed batch",
              name_, out->name(), out->tensor_type().to_string()));
        }
        shape[0] = -1;
      }
      info.outputs.push_back({out->name(), out->tensor_type().dtype, shape});
      output_names_.push_back(out->name());
    }
    return info;
  }

  std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) override {
    std::vector<Result<std::vector<InferTensor>>> out;
    if (!batching_) {
      for (const InferenceRequest* r : batch) out.push_back(run_one(*r));
      return out;
    }
    Result<std::vector<std::vector<InferTensor>>> joined = run_joined(batch);
    if (!joined.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) out.emplace_back(joined.status());
      return out;
    }
    for (auto& outputs : *joined) out.emplace_back(std::move(outputs));
    return out;
  }

 private:
  Result<std::shared_ptr<const Executable>> executable(int64_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = executables_.find(size);
    if (it != executables_.end()) return it->second;
    compiler::ImportOptions options;
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto& [name, dims] : fixed_dims_) {
      std::vector<int64_t> shape = dims;
      if (batching_) shape[0] = size;
      options.input_shapes[name] = shape;
      shapes[name] = shape;
    }
    std::filesystem::path cached;
    if (cache_) {
      cached = cache_dir_ / fmt::format("{}-{:016x}-{}.kiln", target_name_, fingerprint_hash_,
                                        shape_profile(shapes));
      if (std::shared_ptr<Executable> hit = load_cached(cached, shapes)) {
        executables_[size] = hit;
        return std::shared_ptr<const Executable>(hit);
      }
    }
    KILN_ASSIGN_OR_RETURN(auto model, compiler::import_onnx_file(path_.string(), options));
    std::shared_ptr<compiler::Graph> graph(std::move(model->graph));
    Result<std::shared_ptr<Executable>> exe = compiler::compile(graph, *target_);
    if (!exe.ok()) {
      return exe.status().with_context(fmt::format("model \"{}\": compiling {} for {} (batch {})",
                                                   name_, path_.filename().string(), target_name_,
                                                   size));
    }
    if (cache_) save_cached(cached, **exe, shapes);
    executables_[size] = *exe;
    return std::shared_ptr<const Executable>(*exe);
  }

  // The executable in the cache file `path` when it is there, intact, runs here, was compiled
  // from this model's bytes and has `shapes`; otherwise null, with an info log saying why.
  std::shared_ptr<Executable> load_cached(
      const std::filesystem::path& path,
      const std::map<std::string, std::vector<int64_t>>& shapes) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      kiln::log(LogLevel::kInfo, "model \"{}\": no cached artifact {}; compiling", name_,
                path.string());
      return nullptr;
    }
    auto stale = [&](const Status& why) {
      kiln::log(LogLevel::kInfo, "model \"{}\": cached artifact {} is not usable ({}); recompiling",
                name_, path.string(), why.message());
      return nullptr;
    };
    Result<compiler::Artifact> artifact = compiler::open_artifact(path.string());
    if (!artifact.ok()) return stale(artifact.status());
    // The model is read again here rather than kept: a large model's bytes are not held twice.
    Result<std::string> model = read_file(path_.string());
    if (!model.ok()) return stale(model.status());
    Status source = artifact->check_source(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(model->data()), model->size()));
    if (!source.ok()) return stale(source);
    Result<compiler::LoadedArtifact> loaded = compiler::load_artifact(path.string());
    if (!loaded.ok()) return stale(loaded.status());
    if (loaded->header.target != target_name_) {
      return stale(invalid_argument_error(
          fmt::format("compiled for target {}, expected {}", loaded->header.target, target_name_)));
    }
    Status same_shapes = check_input_shapes(*loaded->executable, shapes);
    if (!same_shapes.ok()) return stale(same_shapes);
    kiln::log(LogLevel::kInfo, "model \"{}\": loaded cached artifact {}", name_, path.string());
    return loaded->executable;
  }

  // Writes `exe` to the cache file `path` (atomically); a failure is logged, never an error.
  void save_cached(const std::filesystem::path& path, const Executable& exe,
                   const std::map<std::string, std::vector<int64_t>>& shapes) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    Result<std::string> model = read_file(path_.string());
    if (!model.ok()) {
      kiln::log(LogLevel::kWarning, "model \"{}\": cannot cache the compiled model: {}", name_,
                model.status().message());
      return;
    }
    compiler::ArtifactSource source;
    source.name = path_.filename().string();
    source.size = model->size();
    source.hash = compiler::xxhash64(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(model->data()), model->size()));
    source.recompile_command =
        fmt::format("kiln compile {} --target {}", path_.string(), target_name_);
    for (const auto& [name, dims] : shapes) {
      std::string shape = fmt::format("{}={}", name, fmt::join(dims, ","));
      source.options.emplace_back("input_shape", shape);
      source.recompile_command += " --input-shape " + shape;
    }
    source.recompile_command += " -o " + path.string();
    Status saved = compiler::save_artifact(path.string(), exe, {}, source);
    if (!saved.ok()) {
      kiln::log(LogLevel::kWarning, "model \"{}\": cannot cache the compiled model as {}: {}",
                name_, path.string(), saved.message());
      return;
    }
    kiln::log(LogLevel::kInfo, "model \"{}\": cached the compiled model as {}", name_,
              path.string());
  }

  const Tensor* find_input(const InferenceRequest& r, const std::string& name) const {
    for (const InferTensor& t : r.inputs) {
      if (t.name == name) return &t.data;
    }
    return nullptr;
  }

  Result<std::vector<InferTensor>> run_one(const InferenceRequest& r) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, executable(1));
    std::vector<Argument> args;
    for (const std::string& name : input_names_) {
      const Tensor* t = find_input(r, name);
      if (t == nullptr) return invalid_argument_error(fmt::format("input \"{}\" is missing", name));
      args.emplace_back(*t);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> results, exe->run(std::move(args)));
    std::vector<InferTensor> outputs;
    for (size_t i = 0; i < results.size(); ++i) {
      outputs.push_back({output_names_[i], results[i].tensor(), {}});
    }
    return outputs;
  }

  Result<std::vector<std::vector<InferTensor>>> run_joined(
      std::span<const InferenceRequest* const> batch) {
    int64_t total = 0;
    std::vector<int64_t> rows;
    for (const InferenceRequest* r : batch) {
      const Tensor* first = find_input(*r, input_names_[0]);
      rows.push_back(first->shape()[0]);
      total += rows.back();
    }
    const int64_t size = pad_batch_ ? std::max(batch_, total) : total;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, executable(size));
    std::vector<Argument> args;
    for (const std::string& name : input_names_) {
      const Tensor* first = find_input(*batch[0], name);
      Shape shape = first->shape();
      shape[0] = size;
      KILN_ASSIGN_OR_RETURN(Tensor joined, Tensor::allocate(first->dtype(), shape));
      int64_t at = 0;
      for (const InferenceRequest* r : batch) {
        const Tensor* t = find_input(*r, name);
        copy_rows(*t, t->shape()[0], joined, at);
        at += t->shape()[0];
      }
      // Padding repeats the first request's first row, as amdinfer does, so no slot is garbage.
      for (; at < size; ++at) copy_rows(*first, 1, joined, at);
      args.emplace_back(std::move(joined));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> results, exe->run(std::move(args)));
    std::vector<std::vector<InferTensor>> out(batch.size());
    for (size_t o = 0; o < results.size(); ++o) {
      const Tensor& t = results[o].tensor();
      if (t.rank() == 0 || t.shape()[0] != size) {
        return internal_error(
            fmt::format("model \"{}\": output \"{}\" has shape {}, expected "
                        "the batch size {} first",
                        name_, output_names_[o], t.shape().to_string(), size));
      }
      int64_t at = 0;
      for (size_t i = 0; i < batch.size(); ++i) {
        Tensor part;
        if (batch.size() == 1 && rows[i] == size) {
          part = t;
        } else {
          KILN_ASSIGN_OR_RETURN(part, slice_rows(t, at, rows[i]));
        }
        out[i].push_back({output_names_[o], std::move(part), {}});
        at += rows[i];
      }
    }
    return out;
  }

  std::string name_;
  std::filesystem::path path_;
  std::string target_name_;
  std::unique_ptr<compiler::Target> target_;
  bool batching_ = false;
  bool pad_batch_ = true;
  bool cache_ = true;
  uint64_t fingerprint_hash_ = 0;
  std::filesystem::path cache_dir_;
  int64_t batch_ = 1;
  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  std::map<std::string, std::vector<int64_t>> fixed_dims_;
  std::mutex mutex_;
  std::map<int64_t, std::shared_ptr<const Executable>> executables_;
};

}  // namespace

std::unique_ptr<Backend> make_compiler_backend() {
  return std::make_unique<CompilerBackend>();
}

}  // namespace kiln::server
