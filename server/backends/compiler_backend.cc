// SPDX-License-Identifier: Apache-2.0
// The compiler backend: imports the ONNX model, compiles it per batch size through the compile
// cache (compiler/cache: .kiln artifacts in the server's cache folder, never in the repository),
// and runs batches of requests joined along dim 0.
#include "server/backends/compiler_backend.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "compiler/cache/compile_cache.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"

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

class CompilerBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& ctx) override {
    name_ = ctx.config.name;
    const Parameters& p = ctx.config.parameters;
    KILN_ASSIGN_OR_RETURN(path_, find_model_file(ctx, ".onnx"));
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> target, p.get_string("target"));
    target_name_ = target.value_or("cpu");
    KILN_RETURN_IF_ERROR(compiler::make_target(target_name_).status());  // a clear error now
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
    compiler::CompileRequest request;
    request.target = target_name_;
    for (const auto& [name, dims] : fixed_dims_) {
      std::vector<int64_t> shape = dims;
      if (batching_) shape[0] = size;
      request.import.input_shapes[name] = std::move(shape);
    }
    Result<compiler::CompiledModel> compiled = cache_->get(model_, request);
    if (!compiled.ok()) {
      return compiled.status().with_context(
          fmt::format("model \"{}\": compiling {} for {} (batch {})", name_,
                      path_.filename().string(), target_name_, size));
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
  compiler::ModelSource model_;
  std::unique_ptr<compiler::CompileCache> cache_;  // also holds the executable of each batch size
  bool batching_ = false;
  bool pad_batch_ = true;
  int64_t batch_ = 1;
  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  std::map<std::string, std::vector<int64_t>> fixed_dims_;
};

}  // namespace

std::unique_ptr<Backend> make_compiler_backend() {
  return std::make_unique<CompilerBackend>();
}

}  // namespace kiln::server
