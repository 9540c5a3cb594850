// SPDX-License-Identifier: Apache-2.0
// The JSON bodies of the non-inference endpoints: errors, server and model metadata, readiness,
// the repository index, model configuration, statistics and load parameters.
#include "server/http/metadata_json.h"

#include "server/http/json_util.h"

namespace kiln::server::http {

namespace {

using namespace detail;  // NOLINT: the JSON helpers

void write_tensor_metadata(JsonWriter& w, const std::vector<TensorMetadata>& tensors) {
  w.StartArray();
  for (const TensorMetadata& t : tensors) {
    w.StartObject();
    write_string(w, "name", t.name);
    write_string(w, "datatype", wire_dtype_name(t.dtype));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void write_duration(JsonWriter& w, const char* key, const DurationStat& d) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(d.count);
  w.Key("ns");
  w.Uint64(d.ns);
  w.EndObject();
}

}  // namespace

std::string error_json(std::string_view message) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_string(w, "error", message);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string server_metadata_json(const ServerMetadata& m) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_string(w, "name", m.name);
  write_string(w, "version", m.version);
  w.Key("extensions");
  w.StartArray();
  for (const std::string& e : m.extensions)
    w.String(e.data(), static_cast<rapidjson::SizeType>(e.size()));
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<ServerMetadata> parse_server_metadata_json(std::string_view body) {
  rapidjson::Document doc;
  KILN_RETURN_IF_ERROR(parse_json(body, doc, "the server metadata"));
  if (!doc.IsObject()) return invalid_argument_error("the server metadata is not an object");
  ServerMetadata m;
  if (const Value* v = member(doc, "name"); v && v->IsString()) m.name = sv(*v);
  if (const Value* v = member(doc, "version"); v && v->IsString()) m.version = sv(*v);
  if (const Value* v = member(doc, "extensions"); v && v->IsArray()) {
    for (const Value& e : v->GetArray()) {
      if (e.IsString()) m.extensions.emplace_back(sv(e));
    }
  }
  return m;
}

std::string model_metadata_json(const ModelMetadata& m) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_string(w, "name", m.name);
  w.Key("versions");
  w.StartArray();
  for (const std::string& v : m.versions)
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  w.EndArray();
  write_string(w, "platform", m.platform);
  w.Key("inputs");
  write_tensor_metadata(w, m.inputs);
  w.Key("outputs");
  write_tensor_metadata(w, m.outputs);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<ModelMetadata> parse_model_metadata_json(std::string_view body) {
  rapidjson::Document doc;
  KILN_RETURN_IF_ERROR(parse_json(body, doc, "the model metadata"));
  if (!doc.IsObject()) return invalid_argument_error("the model metadata is not an object");
  ModelMetadata m;
  if (const Value* v = member(doc, "name"); v && v->IsString()) m.name = sv(*v);
  if (const Value* v = member(doc, "platform"); v && v->IsString()) m.platform = sv(*v);
  if (const Value* v = member(doc, "versions"); v && v->IsArray()) {
    for (const Value& e : v->GetArray()) {
      if (e.IsString()) m.versions.emplace_back(sv(e));
    }
  }
  for (const char* key : {"inputs", "outputs"}) {
    const Value* list = member(doc, key);
    if (list == nullptr || !list->IsArray()) continue;
    for (const Value& e : list->GetArray()) {
      TensorMetadata t;
      const Value* name = e.IsObject() ? member(e, "name") : nullptr;
      const Value* dt = e.IsObject() ? member(e, "datatype") : nullptr;
      const Value* shape = e.IsObject() ? member(e, "shape") : nullptr;
      if (!name || !name->IsString() || !dt || !dt->IsString() || !shape || !shape->IsArray()) {
        return invalid_argument_error(
            fmt::format("the model metadata's {} need name, datatype and shape", key));
      }
      t.name = sv(*name);
      std::optional<DType> d = parse_wire_dtype(sv(*dt));
      if (!d) return invalid_argument_error(fmt::format("unknown datatype \"{}\"", sv(*dt)));
      t.dtype = *d;
      for (const Value& x : shape->GetArray()) t.shape.push_back(x.IsInt64() ? x.GetInt64() : -1);
      (std::string_view(key) == "inputs" ? m.inputs : m.outputs).push_back(std::move(t));
    }
  }
  return m;
}

std::string model_ready_json(std::string_view name, bool ready) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_string(w, "name", name);
  w.Key("ready");
  w.Bool(ready);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string model_list_json(const std::vector<std::string>& names) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("models");
  w.StartArray();
  for (const std::string& n : names) w.String(n.data(), static_cast<rapidjson::SizeType>(n.size()));
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string repository_index_json(const std::vector<RepositoryEntry>& entries) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const RepositoryEntry& e : entries) {
    w.StartObject();
    write_string(w, "name", e.name);
    if (!e.version.empty()) write_string(w, "version", e.version);
    write_string(w, "state", e.state);
    if (!e.reason.empty()) write_string(w, "reason", e.reason);
    w.EndObject();
  }
  w.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string model_config_json(const ModelConfig& c) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  const bool batched = c.batching.max_batch_size > 0;
  auto tensors = [&](const char* key, const std::vector<TensorMetadata>& list) {
    w.Key(key);
    w.StartArray();
    for (const TensorMetadata& t : list) {
      w.StartObject();
      write_string(w, "name", t.name);
      write_string(w, "data_type",
                   fmt::format("TYPE_{}", t.dtype == DType::kString ? std::string_view("STRING")
                                                                    : wire_dtype_name(t.dtype)));
      w.Key("dims");
      w.StartArray();
      for (size_t i = batched && !t.shape.empty() ? 1 : 0; i < t.shape.size(); ++i) {
        w.Int64(t.shape[i]);
      }
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
  };
  w.StartObject();
  write_string(w, "name", c.name);
  write_string(w, "platform", c.platform);
  write_string(w, "backend", c.backend);
  w.Key("max_batch_size");
  w.Int64(c.batching.max_batch_size);
  tensors("input", c.inputs);
  tensors("output", c.outputs);
  w.Key("instance_group");
  w.StartArray();
  w.StartObject();
  w.Key("count");
  w.Int64(c.instances);
  write_string(w, "kind", "KIND_CPU");
  w.EndObject();
  w.EndArray();
  w.Key("dynamic_batching");
  w.StartObject();
  w.Key("preferred_batch_size");
  w.StartArray();
  for (int64_t p : c.batching.preferred_batch_size) w.Int64(p);
  w.EndArray();
  w.Key("max_queue_delay_microseconds");
  w.Int64(c.batching.max_queue_delay_microseconds);
  w.Key("default_queue_policy");
  w.StartObject();
  w.Key("max_queue_size");
  w.Int64(c.batching.max_queue_size);
  w.Key("default_timeout_microseconds");
  w.Int64(c.batching.default_timeout_microseconds);
  w.EndObject();
  w.EndObject();
  w.Key("parameters");
  w.StartObject();
  for (const auto& [key, value] : c.parameters.values()) {
    w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
    w.StartObject();
    write_string(w, "string_value", parameter_to_string(value));
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string statistics_json(const std::vector<ModelStatistics>& stats) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const ModelStatistics& s : stats) {
    w.StartObject();
    write_string(w, "name", s.name);
    write_string(w, "version", s.version);
    w.Key("last_inference");
    w.Uint64(s.last_inference_ms);
    w.Key("inference_count");
    w.Uint64(s.inference_count);
    w.Key("execution_count");
    w.Uint64(s.execution_count);
    w.Key("pending_request_count");
    w.Int64(s.pending);
    w.Key("inference_stats");
    w.StartObject();
    write_duration(w, "success", s.success);
    write_duration(w, "fail", s.fail);
    write_duration(w, "queue", s.queue);
    write_duration(w, "compute_infer", s.compute);
    w.EndObject();
    w.Key("failures");
    w.StartObject();
    for (int i = 0; i < kNumFailureReasons; ++i) {
      w.Key(failure_reason_name(static_cast<FailureReason>(i)));
      w.Uint64(s.failures[i]);
    }
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (const auto& [size, d] : s.batch_stats) {
      w.StartObject();
      w.Key("batch_size");
      w.Int64(size);
      write_duration(w, "compute_infer", d);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<Parameters> parse_parameters_json(std::string_view body) {
  Parameters p;
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return p;
  rapidjson::Document doc;
  KILN_RETURN_IF_ERROR(parse_json(body, doc, "the request body"));
  if (!doc.IsObject()) {
    return invalid_argument_error("the request body must be a JSON object of parameters");
  }
  const Value* nested = member(doc, "parameters");
  KILN_RETURN_IF_ERROR(
      parse_parameter_object(nested != nullptr ? *nested : doc, p, "the request body"));
  return p;
}

std::string parameters_json(const Parameters& parameters) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("parameters");
  write_parameters(w, parameters);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace kiln::server::http
