// SPDX-License-Identifier: Apache-2.0
// Model inputs and outputs for the CLI.
#include "tools/model_io.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "compiler/onnx/importer.h"
#include "core/mapped_file.h"
#include "core/npy.h"

namespace kiln::tools {

namespace {

using compiler::Argument;
using compiler::TensorType;

Result<std::pair<std::string, std::string>> split_assignment(const std::string& text,
                                                             std::string_view flag) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalid_argument_error(fmt::format("{} \"{}\": expected NAME=VALUE", flag, text));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Result<std::vector<int64_t>> parse_dims(const std::string& text, const std::string& name) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of("x,", start);
    std::string part =
        text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* stop = nullptr;
    long long v = std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || v < 0) {
      return invalid_argument_error(
          fmt::format("--input-shape {}={}: expected dims like 1x3x224x224", name, text));
    }
    dims.push_back(v);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return dims;
}

Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  Tensor t(dtype, shape);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = (rng() & 1) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(rng() % 10);
      } else if constexpr (!std::is_same_v<T, std::string>) {
        p[i] = T(static_cast<float>(std::uniform_real_distribution<double>(0.0, 1.0)(rng)));
      }
    }
  });
  return t;
}

}  // namespace

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

Result<std::map<std::string, std::vector<int64_t>>> parse_input_shapes(
    const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& s : values) {
    KILN_ASSIGN_OR_RETURN(auto kv, split_assignment(s, "--input-shape"));
    KILN_ASSIGN_OR_RETURN(shapes[kv.first], parse_dims(kv.second, kv.first));
  }
  return shapes;
}

namespace {

// Whether the first dim of `type` (ranked) is its only dynamic one.
bool only_batch_dynamic(const compiler::TensorType& type) {
  for (size_t d = 1; d < type.dims->size(); ++d) {
    if (!(*type.dims)[d].known()) return false;
  }
  return true;
}

// Builds one argument per input of `graph`: from `given` when there, else random. Dynamic dims of
// a random input come from `shapes` (--input-shape), which must agree with the known ones, else a
// dynamic first dim from `batch` (--batch, when positive) where it is the only dynamic one.
Result<std::vector<Argument>> make_inputs(const compiler::Graph& graph,
                                          std::map<std::string, Tensor> given,
                                          const std::map<std::string, std::vector<int64_t>>& shapes,
                                          int64_t batch, uint64_t seed) {
  std::vector<Argument> out;
  std::mt19937_64 rng(seed);
  for (const compiler::Value* in : graph.inputs()) {
    if (!in->type().is_tensor()) {
      return unimplemented_error(fmt::format("input \"{}\" is a {}; kiln run feeds tensors only",
                                             in->name(), in->type().to_string()));
    }
    const TensorType& type = in->tensor_type();
    auto it = given.find(in->name());
    if (it != given.end()) {
      if (it->second.dtype() != type.dtype) {
        return invalid_argument_error(
            fmt::format("--input {}: the model expects {} but the file holds {}; convert it with "
                        "numpy's astype",
                        in->name(), dtype_name(type.dtype), dtype_name(it->second.dtype())));
      }
      out.emplace_back(it->second);
      given.erase(it);
      continue;
    }
    Shape shape;
    auto given_shape = shapes.find(in->name());
    if (type.is_static()) {
      shape = type.shape();
    } else if (given_shape != shapes.end() && type.has_rank()) {
      shape = Shape(given_shape->second);
      bool fits = shape.rank() == type.rank();
      for (int d = 0; fits && d < type.rank(); ++d) {
        const compiler::Dim& dim = (*type.dims)[static_cast<size_t>(d)];
        fits = !dim.known() || dim.value == shape[d];
      }
      if (!fits) {
        return invalid_argument_error(
            fmt::format("--input-shape {}: the model's input is {}, the shape given is {}",
                        in->name(), type.to_string(), shape.to_string()));
      }
    } else if (batch > 0 && type.has_rank() && type.rank() >= 1 && only_batch_dynamic(type)) {
      std::vector<int64_t> dims;
      for (const compiler::Dim& dim : *type.dims) dims.push_back(dim.known() ? dim.value : batch);
      shape = Shape(dims);
    } else {
      return invalid_argument_error(
          fmt::format("input \"{}\" has dynamic dims {}; give its shape with --input-shape {}=DIMS "
                      "(e.g. 1x3x224x224)",
                      in->name(), type.to_string(), in->name()));
    }
    if (type.dtype == DType::kString) {
      return invalid_argument_error(fmt::format(
          "input \"{}\" holds strings; kiln run cannot make random strings, so it needs a value",
          in->name()));
    }
    out.emplace_back(random_tensor(type.dtype, shape, rng));
  }
  if (!given.empty()) {
    std::string names;
    for (const compiler::Value* in : graph.inputs())
      names += (names.empty() ? "" : ", ") + in->name();
    return invalid_argument_error(
        fmt::format("--input {}: the model has no such input; its inputs are: {}",
                    given.begin()->first, names));
  }
  return out;
}

}  // namespace

Result<PreparedModel> prepare_model(const std::string& path, const ModelInputOptions& options) {
  compiler::ImportOptions import;
  if (options.batch > 0) import.default_dim_value = options.batch;
  KILN_ASSIGN_OR_RETURN(import.input_shapes, parse_input_shapes(options.input_shapes));
  std::map<std::string, Tensor> given;
  for (const std::string& s : options.inputs) {
    KILN_ASSIGN_OR_RETURN(auto kv, split_assignment(s, "--input"));
    Result<Tensor> t = read_npy(kv.second);
    if (!t.ok()) return t.status().with_context(fmt::format("--input {}", kv.first));
    if (!import.input_shapes.count(kv.first)) import.input_shapes[kv.first] = t->shape().dims();
    given[kv.first] = std::move(t).value();
  }
  for (const auto& [name, t] : options.tensors) {
    if (given.count(name)) {
      return invalid_argument_error(
          fmt::format("--input {}: given twice, as a .npy file and as images", name));
    }
    if (!import.input_shapes.count(name)) import.input_shapes[name] = t.shape().dims();
    given[name] = t;
  }
  PreparedModel out;
  if (compiler::is_artifact_file(path)) {
    auto start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(compiler::LoadedArtifact loaded, compiler::load_artifact(path));
    out.load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    out.executable = std::move(loaded.executable);
    out.artifact = std::move(loaded.header);
    KILN_ASSIGN_OR_RETURN(
        out.inputs, make_inputs(out.executable->graph(), std::move(given), import.input_shapes,
                                options.batch, options.seed));
    return out;
  }
  KILN_ASSIGN_OR_RETURN(out.model, compiler::import_onnx_file(path, import));
  out.import = import;
  KILN_ASSIGN_OR_RETURN(out.inputs,
                        make_inputs(*out.model->graph, std::move(given), {}, 0, options.seed));
  return out;
}

std::string sanitize_file_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "output";
  return out;
}

std::string output_file_name(const std::string& name) {
  std::string safe = sanitize_file_name(name);
  if (safe == name && name.size() <= kMaxPlainFileName) return name + ".npy";
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001b3ull;
  if (safe.size() > kMaxPlainFileName) safe.resize(kMaxPlainFileName);
  return fmt::format("{}-{:08x}.npy", safe, static_cast<uint32_t>(hash >> 32));
}

Status write_outputs(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<Argument>& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return permission_denied_error(fmt::format("cannot create \"{}\": {}", dir, ec.message()));
  std::string json = "{\n  \"outputs\": [";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_tensor()) {
      return unimplemented_error(
          fmt::format("output \"{}\" is a {}; only tensors can be written as .npy", names[i],
                      outputs[i].to_string()));
    }
    const Tensor& t = outputs[i].tensor();
    std::string file = output_file_name(names[i]);
    KILN_RETURN_IF_ERROR(write_npy((std::filesystem::path(dir) / file).string(), t.view()));
    json += fmt::format(
        "{}\n    {{\"name\": \"{}\", \"file\": \"{}\", \"dtype\": \"{}\", \"shape\": [{}]}}",
        i ? "," : "", json_escape(names[i]), json_escape(file), dtype_name(t.dtype()),
        fmt::join(t.shape().dims(), ", "));
  }
  json += "\n  ]\n}\n";
  return write_file_atomic((std::filesystem::path(dir) / "outputs.json").string(),
                           std::span(reinterpret_cast<const uint8_t*>(json.data()), json.size()));
}

std::string summarize(const Argument& value) {
  if (!value.is_tensor()) return value.to_string();
  const Tensor& t = value.tensor();
  std::string out = fmt::format("{}{}", dtype_name(t.dtype()), t.shape().to_string());
  const int64_t n = std::min<int64_t>(t.numel(), 6);
  std::vector<std::string> shown;
  visit_dtype(t.dtype(), [&]<class T>() {
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, std::string>) {
        shown.push_back(fmt::format("\"{}\"", t.data<T>()[i]));
      } else if constexpr (std::is_integral_v<T>) {
        shown.push_back(std::to_string(static_cast<int64_t>(t.data<T>()[i])));
      } else {
        shown.push_back(
            fmt::format("{:.6g}", static_cast<double>(static_cast<float>(t.data<T>()[i]))));
      }
    }
  });
  return fmt::format("{} [{}{}]", out, fmt::join(shown, ", "), t.numel() > n ? ", ..." : "");
}

}  // namespace kiln::tools
