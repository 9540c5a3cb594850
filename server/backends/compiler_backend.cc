// SPDX-License-Identifier: Apache-2.0
// The compiler backend: imports the ONNX model, compiles it per batch size through the compile
// cache (compiler/cache: .kiln artifacts in the server's cache folder, never in the repository),
// and runs batches of requests joined along dim 0.
#include "server/backends/compiler_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "compiler/cache/compile_cache.h"
#include "compiler/cache/input_folder.h"
#include "compiler/onnx/importer.h"
#include "compiler/quantize/quantize.h"
#include "compiler/targets/target.h"
#include "core/logging.h"

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

// Whether any output shares memory with the input buffer [begin, begin + bytes): then the buffer
// must not be refilled while the responses hold those outputs.
bool aliases(const std::vector<Argument>& outputs, const Tensor& buffer) {
  const auto* begin = static_cast<const char*>(buffer.raw_data());
  const char* end = begin + buffer.nbytes();
  for (const Argument& a : outputs) {
    if (!a.is_tensor()) continue;
    const auto* p = static_cast<const char*>(a.tensor().raw_data());
    if (p != nullptr && p < end && p + a.tensor().nbytes() > begin) return true;
  }
  return false;
}

class CompilerBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& ctx) override {
    name_ = ctx.config.name;
    const Parameters& p = ctx.config.parameters;
    KILN_ASSIGN_OR_RETURN(path_, find_model_file(ctx, ".onnx"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> target, p.get_string("target"));
    target_name_ = target.value_or("cpu");
    KILN_RETURN_IF_ERROR(compiler::make_target(target_name_).status());  // a clear error now
    KILN_RETURN_IF_ERROR(read_precision(ctx));
    for (int64_t g : ctx.config.gpus) gpus_.push_back(static_cast<int>(g));
    if (gpus_.empty()) {
      gpus_.push_back(0);
    } else if (target_name_ != "cuda") {
      return invalid_argument_error(fmt::format(
          "model \"{}\": gpus lists GPUs but the target is {}; set parameter target = \"cuda\" "
          "or leave gpus out",
          name_, target_name_));
    }
    busy_ = std::make_unique<std::atomic<int>[]>(gpus_.size());
    max_pooled_ = std::max<int64_t>(1, ctx.config.instances);
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> batch, p.get_int("batch"));
    if (!batch) {
      KILN_ASSIGN_OR_RETURN(batch, p.get_int("batch_size"));
    }
    KILN_ASSIGN_OR_RETURN(std::optional<bool> pad, p.get_bool("pad_batch"));
    pad_batch_ = pad.value_or(true);
    KILN_ASSIGN_OR_RETURN(std::optional<bool> cache, p.get_bool("cache"));
    // The cache lives outside the repository (which may be read-only, and is never written); its
    // files are keyed by the model's bytes, so models of one name in different repositories keep
    // apart and one model in two repositories is compiled once.
    const bool on_disk = cache.value_or(true) && !ctx.cache_dir.empty();
    cache_ = std::make_unique<compiler::CompileCache>(ctx.cache_dir, on_disk);
    KILN_ASSIGN_OR_RETURN(model_, compiler::ModelSource::from_file(path_.string(), name_));

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

    // Every GPU compiles (or loads) its executable now: errors show at load, not on a request.
    std::shared_ptr<const Executable> exe;
    for (size_t g = 0; g < gpus_.size(); ++g) {
      KILN_ASSIGN_OR_RETURN(exe, executable(batch_, g));
    }
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
  // Reads parameters precision (fp32, fp16, bf16 or int8) and, for int8, calibration (a folder
  // of .npy inputs in the version folder) and calibration_method.
  Status read_precision(const BackendContext& ctx) {
    const Parameters& p = ctx.config.parameters;
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> precision, p.get_string("precision"));
    precision_ = precision.value_or("fp32");
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> calibration, p.get_string("calibration"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> method, p.get_string("calibration_method"));
    if (precision_ != "int8" && (calibration || method)) {
      return invalid_argument_error(fmt::format(
          "model \"{}\": calibration and calibration_method are for precision \"int8\", not "
          "\"{}\"",
          name_, precision_));
    }
    if (precision_ == "fp32") return Status();
    if (precision_ == "fp16" || precision_ == "bf16") {
      rewrite_flags_ = {{precision_, ""}};
      return Status();
    }
    if (precision_ != "int8") {
      return invalid_argument_error(
          fmt::format("model \"{}\": precision must be fp32, fp16, bf16 or int8, got \"{}\"", name_,
                      precision_));
    }
    if (!calibration) {
      return invalid_argument_error(fmt::format(
          "model \"{}\": precision \"int8\" needs parameter calibration: a folder of .npy "
          "inputs in the version folder (see docs/quantization.md)",
          name_));
    }
    KILN_ASSIGN_OR_RETURN(calibration_, repository_path(ctx, "calibration", *calibration));
    std::error_code ec;
    if (!std::filesystem::is_directory(calibration_, ec)) {
      return invalid_argument_error(
          fmt::format("model \"{}\": calibration {} is not a folder; give a folder of .npy inputs",
                      name_, calibration_.string()));
    }
    KILN_ASSIGN_OR_RETURN(method_, compiler::parse_calibration_method(method.value_or("max")));
    data_hash_ = compiler::hash_input_folder(calibration_);
    if (data_hash_ == 0) {
      return not_found_error(
          fmt::format("model \"{}\": calibration folder {} holds no readable files", name_,
                      calibration_.string()));
    }
    rewrite_flags_ = {
        {"int8", ""},
        {"calibration", calibration_.filename().string()},
        {"calibration-method", std::string(compiler::calibration_method_name(method_))}};
    return Status();
  }

  // The precision rewrite of an imported graph; null for fp32.
  std::function<Status(compiler::Graph&, const compiler::Target&)> rewrite() const {
    if (precision_ == "fp16") {
      return [](compiler::Graph& g, const compiler::Target&) { return compiler::quantize_fp16(g); };
    }
    if (precision_ == "bf16") {
      return [](compiler::Graph& g, const compiler::Target&) { return compiler::quantize_bf16(g); };
    }
    if (precision_ != "int8") return nullptr;
    return [this](compiler::Graph& g, const compiler::Target& target) -> Status {
      KILN_ASSIGN_OR_RETURN(std::vector<compiler::FolderBatch> read,
                            compiler::read_npy_folder(calibration_, g));
      if (read.empty()) {
        return not_found_error(
            fmt::format("model \"{}\": calibration folder {} holds no .npy inputs", name_,
                        calibration_.string()));
      }
      std::vector<compiler::CalibrationBatch> batches;
      for (compiler::FolderBatch& b : read) batches.push_back(std::move(b.tensors));
      compiler::Int8Options options;
      options.method = method_;
      KILN_ASSIGN_OR_RETURN(compiler::Int8Report report,
                            compiler::quantize_int8(g, target, batches, options));
      log(LogLevel::kInfo, "model \"{}\": int8: {} nodes quantized from {} calibration batches",
          name_, report.quantized_nodes, report.batches);
      return Status();
    };
  }

  // The least busy GPU (an index into gpus_), marked busy until release_gpu.
  size_t take_gpu() {
    size_t best = 0;
    for (size_t g = 1; g < gpus_.size(); ++g) {
      if (busy_[g].load(std::memory_order_relaxed) < busy_[best].load(std::memory_order_relaxed)) {
        best = g;
      }
    }
    busy_[best].fetch_add(1, std::memory_order_relaxed);
    return best;
  }
  void release_gpu(size_t g) { busy_[g].fetch_sub(1, std::memory_order_relaxed); }

  // A set of joined-input buffers for batches of `size` on GPU `gpu` (the executable's
  // host_tensor: page-locked on cuda), from the pool or new.
  Result<std::vector<Tensor>> take_buffers(const Executable& exe, size_t gpu, int64_t size,
                                           const InferenceRequest& first) {
    {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      std::vector<std::vector<Tensor>>& free = pool_[{gpu, size}];
      if (!free.empty()) {
        std::vector<Tensor> buffers = std::move(free.back());
        free.pop_back();
        return buffers;
      }
    }
    std::vector<Tensor> buffers;
    for (const std::string& name : input_names_) {
      const Tensor* t = find_input(first, name);
      Shape shape = t->shape();
      shape[0] = size;
      KILN_ASSIGN_OR_RETURN(Tensor b, t->dtype() == DType::kString
                                          ? Tensor::allocate(t->dtype(), shape)
                                          : exe.host_tensor(t->dtype(), shape));
      buffers.push_back(std::move(b));
    }
    return buffers;
  }
  void give_back_buffers(size_t gpu, int64_t size, std::vector<Tensor> buffers) {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    std::vector<std::vector<Tensor>>& free = pool_[{gpu, size}];
    // As many sets as instances can use at once; more are freed.
    if (static_cast<int64_t>(free.size()) < max_pooled_) free.push_back(std::move(buffers));
  }

  Result<std::shared_ptr<const Executable>> executable(int64_t size, size_t gpu = 0) {
    compiler::CompileRequest request;
    request.target = target_name_;
    request.device = gpus_.empty() ? 0 : gpus_[gpu];
    request.rewrite = rewrite();
    request.rewrite_flags = rewrite_flags_;
    request.data_hash = data_hash_;
    for (const auto& [name, dims] : fixed_dims_) {
      std::vector<int64_t> shape = dims;
      if (batching_) shape[0] = size;
      request.import.input_shapes[name] = std::move(shape);
    }
    Result<compiler::CompiledModel> compiled = cache_->get(model_, request);
    if (!compiled.ok()) {
      return compiled.status().with_context(fmt::format(
          "model \"{}\": compiling {} for {}{} ({}, batch {})", name_, path_.filename().string(),
          target_name_, target_name_ == "cuda" ? fmt::format(" GPU {}", request.device) : "",
          precision_, size));
    }
    return std::shared_ptr<const Executable>(compiled->executable);
  }

  const Tensor* find_input(const InferenceRequest& r, const std::string& name) const {
    for (const InferTensor& t : r.inputs) {
      if (t.name == name) return &t.data;
    }
    return nullptr;
  }

  Result<std::vector<InferTensor>> run_one(const InferenceRequest& r) {
    const size_t gpu = take_gpu();
    Result<std::vector<InferTensor>> out = run_one_on(r, gpu);
    release_gpu(gpu);
    return out;
  }

  Result<std::vector<InferTensor>> run_one_on(const InferenceRequest& r, size_t gpu) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, executable(1, gpu));
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
    const size_t gpu = take_gpu();
    Result<std::vector<std::vector<InferTensor>>> out = run_joined_on(batch, gpu);
    release_gpu(gpu);
    return out;
  }

  Result<std::vector<std::vector<InferTensor>>> run_joined_on(
      std::span<const InferenceRequest* const> batch, size_t gpu) {
    int64_t total = 0;
    std::vector<int64_t> rows;
    for (const InferenceRequest* r : batch) {
      const Tensor* first = find_input(*r, input_names_[0]);
      rows.push_back(first->shape()[0]);
      total += rows.back();
    }
    const int64_t size = pad_batch_ ? std::max(batch_, total) : total;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, executable(size, gpu));
    // The requests' rows go into a reused set of buffers (page-locked on cuda, so the GPU reads
    // them with no staging copy), not into fresh zeroed memory per batch.
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> buffers, take_buffers(*exe, gpu, size, *batch[0]));
    std::vector<Argument> args;
    for (size_t i = 0; i < input_names_.size(); ++i) {
      const Tensor* first = find_input(*batch[0], input_names_[i]);
      Tensor& joined = buffers[i];
      int64_t at = 0;
      for (const InferenceRequest* r : batch) {
        const Tensor* t = find_input(*r, input_names_[i]);
        copy_rows(*t, t->shape()[0], joined, at);
        at += t->shape()[0];
      }
      // Padding repeats the first request's first row, as amdinfer does, so no slot is garbage.
      for (; at < size; ++at) copy_rows(*first, 1, joined, at);
      args.emplace_back(joined);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> results, exe->run(std::move(args)));
    if (std::none_of(buffers.begin(), buffers.end(),
                     [&](const Tensor& b) { return aliases(results, b); })) {
      give_back_buffers(gpu, size, std::move(buffers));
    }
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
  compiler::ModelSource model_;
  std::unique_ptr<compiler::CompileCache> cache_;  // also holds the executable of each batch size
  bool batching_ = false;
  bool pad_batch_ = true;
  int64_t batch_ = 1;
  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  std::map<std::string, std::vector<int64_t>> fixed_dims_;
  // Precision: "fp32", "fp16", "bf16" or "int8" (with its calibration folder and method).
  std::string precision_ = "fp32";
  std::filesystem::path calibration_;
  compiler::CalibrationMethod method_ = compiler::CalibrationMethod::kMax;
  uint64_t data_hash_ = 0;
  std::vector<std::pair<std::string, std::string>> rewrite_flags_;
  // The GPUs (device indices) the executables are on, and the batches running on each.
  std::vector<int> gpus_;
  std::unique_ptr<std::atomic<int>[]> busy_;
  // Free joined-input buffer sets per (GPU index, batch size).
  std::mutex pool_mutex_;
  std::map<std::pair<size_t, int64_t>, std::vector<std::vector<Tensor>>> pool_;
  int64_t max_pooled_ = 1;
};

}  // namespace

std::unique_ptr<Backend> make_compiler_backend() {
  return std::make_unique<CompilerBackend>();
}

}  // namespace kiln::server
