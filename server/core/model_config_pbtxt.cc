// SPDX-License-Identifier: Apache-2.0
// Triton's config.pbtxt (protobuf text format) read into a ModelConfig, for the fields kiln
// supports; any other field is an error that names it.
#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <map>

#include "server/core/model_config.h"
#include "server/proto/model_config.pb.h"

namespace kiln::server {

namespace {

class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first.empty()) first = fmt::format("{}:{}: {}", line + 1, column + 1, message);
  }
  std::string first;
};

std::optional<DType> dtype_of(proto::DataType t) {
  switch (t) {
    case proto::TYPE_BOOL: return DType::kBool;
    case proto::TYPE_UINT8: return DType::kU8;
    case proto::TYPE_UINT16: return DType::kU16;
    case proto::TYPE_UINT32: return DType::kU32;
    case proto::TYPE_UINT64: return DType::kU64;
    case proto::TYPE_INT8: return DType::kI8;
    case proto::TYPE_INT16: return DType::kI16;
    case proto::TYPE_INT32: return DType::kI32;
    case proto::TYPE_INT64: return DType::kI64;
    case proto::TYPE_FP16: return DType::kF16;
    case proto::TYPE_FP32: return DType::kF32;
    case proto::TYPE_FP64: return DType::kF64;
    case proto::TYPE_STRING: return DType::kString;
    case proto::TYPE_BF16: return DType::kBF16;
    default: return std::nullopt;
  }
}

template <class T>
Result<TensorMetadata> tensor(const T& t, bool batched, std::string_view source,
                              std::string_view kind) {
  std::optional<DType> dtype = dtype_of(t.data_type());
  if (!dtype) {
    return invalid_argument_error(fmt::format(
        "{}: {} \"{}\" needs a data_type (TYPE_FP32, TYPE_INT64, ...)", source, kind, t.name()));
  }
  TensorMetadata m{t.name(), *dtype, {}};
  if (batched) m.shape.push_back(-1);  // Triton's dims leave out the batch dim
  for (int64_t d : t.dims()) m.shape.push_back(d);
  return m;
}

}  // namespace

Result<ModelConfig> parse_model_config_pbtxt(std::string_view text, std::string_view source) {
  proto::ModelConfig pb;
  google::protobuf::TextFormat::Parser parser;
  Collector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &pb)) {
    return invalid_argument_error(fmt::format(
        "{}:{} (kiln reads these Triton fields: name, platform, backend, version_policy, "
        "max_batch_size, input, output, instance_group, default_model_filename, "
        "dynamic_batching, parameters, ensemble_scheduling)",
        source, errors.first));
  }
  ModelConfig c;
  c.name = pb.name();
  c.platform = pb.platform();
  c.backend = pb.backend();
  if (c.backend == "onnxruntime" || c.platform == "onnxruntime_onnx") {
    c.backend = "compiler";  // kiln serves ONNX models with its own compiler
    if (c.platform.empty()) c.platform = "onnx_onnxv1";
  }
  if (pb.version_policy().has_all()) {
    c.version_policy = "all";
  } else if (pb.version_policy().has_latest() && pb.version_policy().latest().num_versions() > 1) {
    return invalid_argument_error(fmt::format(
        "{}: version_policy latest {{ num_versions: {} }}: kiln loads the latest one or all",
        source, pb.version_policy().latest().num_versions()));
  }
  if (pb.max_batch_size() < 0) {
    return invalid_argument_error(
        fmt::format("{}: max_batch_size must be at least 0, got {}", source, pb.max_batch_size()));
  }
  c.batching.max_batch_size = pb.max_batch_size();
  const bool batched = pb.max_batch_size() > 0;
  for (const auto& in : pb.input()) {
    KILN_ASSIGN_OR_RETURN(TensorMetadata t, tensor(in, batched, source, "input"));
    c.inputs.push_back(std::move(t));
  }
  for (const auto& out : pb.output()) {
    KILN_ASSIGN_OR_RETURN(TensorMetadata t, tensor(out, batched, source, "output"));
    c.outputs.push_back(std::move(t));
  }
  // Triton runs `count` instances on each GPU a group lists; kiln runs every group on one set of
  // GPUs, so the groups that list GPUs must list the same ones.
  bool on_gpu = false;
  if (pb.instance_group_size() > 0) {
    c.instances = 0;
    for (const auto& g : pb.instance_group()) {
      c.instances += std::max(1, g.count());
      on_gpu = on_gpu || g.kind() == proto::ModelInstanceGroup::KIND_GPU || g.gpus_size() > 0;
      if (g.gpus_size() == 0) continue;
      std::vector<int64_t> gpus(g.gpus().begin(), g.gpus().end());
      if (!c.gpus.empty() && c.gpus != gpus) {
        return invalid_argument_error(fmt::format(
            "{}: instance groups list different gpus; kiln runs every group on the same GPUs, so "
            "list the same gpus in each (or merge the groups)",
            source));
      }
      c.gpus = std::move(gpus);
    }
  }
  if (!pb.default_model_filename().empty()) {
    c.parameters.set("model", pb.default_model_filename());
  }
  if (pb.has_dynamic_batching()) {
    const auto& d = pb.dynamic_batching();
    for (int32_t p : d.preferred_batch_size()) {
      if (p < 1) {
        return invalid_argument_error(
            fmt::format("{}: preferred_batch_size must be at least 1, got {}", source, p));
      }
      c.batching.preferred_batch_size.push_back(p);
    }
    c.batching.max_queue_delay_microseconds =
        static_cast<int64_t>(std::min<uint64_t>(d.max_queue_delay_microseconds(), INT64_MAX));
    c.batching.max_queue_size = d.default_queue_policy().max_queue_size();
    c.batching.default_timeout_microseconds = static_cast<int64_t>(
        std::min<uint64_t>(d.default_queue_policy().default_timeout_microseconds(), INT64_MAX));
  }
  for (const auto& [key, value] : pb.parameters()) c.parameters.set(key, value.string_value());
  // A compiled model on KIND_GPU instances runs on the cuda target unless a parameter says else.
  const bool compiled =
      c.backend == "compiler" || (c.backend.empty() && c.platform == "onnx_onnxv1");
  if (on_gpu && compiled && !c.parameters.has("target")) {
    c.parameters.set("target", std::string("cuda"));
  }
  for (const auto& step : pb.ensemble_scheduling().step()) {
    ChainStep s;
    s.model = step.model_name();
    if (step.model_version() >= 0) s.version = std::to_string(step.model_version());
    // Triton's maps are sorted here; the order of a step's tensors does not matter.
    std::map<std::string, std::string> in(step.input_map().begin(), step.input_map().end());
    std::map<std::string, std::string> out(step.output_map().begin(), step.output_map().end());
    s.input_map.assign(in.begin(), in.end());
    s.output_map.assign(out.begin(), out.end());
    c.steps.push_back(std::move(s));
  }
  if (c.platform == "ensemble" && c.backend.empty()) c.backend = "chain";
  KILN_RETURN_IF_ERROR(validate_model_config(c, source));
  return c;
}

}  // namespace kiln::server
