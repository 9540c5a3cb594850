// SPDX-License-Identifier: Apache-2.0
// KServe v2 JSON bodies with RapidJSON: tensors as (nested) JSON arrays or as raw binary chunks
// after the JSON header.
#include "server/http/infer_json.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "server/http/json_data.h"
#include "server/http/json_util.h"

namespace kiln::server::http {

namespace {

using namespace detail;  // NOLINT: the JSON helpers
constexpr int kMaxNesting = 64;

template <class T>
Status convert(const Value& v, T& out, std::string_view where, int64_t index) {
  auto bad = [&](std::string_view expected) {
    return invalid_argument_error(
        fmt::format("{}: element {}: expected {}", where, index, expected));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.IsBool()) return bad("true or false (datatype BOOL)");
    out = v.GetBool();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.IsString()) return bad("a string (datatype BYTES)");
    out.assign(v.GetString(), v.GetStringLength());
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (!v.IsUint64()) return bad("an integer in 0..2^64-1");
      out = v.GetUint64();
    } else {
      if (!v.IsInt64()) return bad("an integer");
      int64_t x = v.GetInt64();
      if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (x > 0 &&
           static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return invalid_argument_error(
            fmt::format("{}: element {}: {} is out of range of the "
                        "datatype",
                        where, index, x));
      }
      out = static_cast<T>(x);
    }
  } else {
    if (!v.IsNumber()) return bad("a number");
    if constexpr (std::is_same_v<T, double>) {
      out = v.GetDouble();
    } else {
      out = T(static_cast<float>(v.GetDouble()));
    }
  }
  return Status();
}

template <class T>
Status read_elements(const Value& v, T* out, int64_t n, int64_t& at, std::string_view where,
                     int depth) {
  if (v.IsArray()) {
    if (depth > kMaxNesting) {
      return invalid_argument_error(
          fmt::format("{}: data is nested deeper than {} arrays", where, kMaxNesting));
    }
    for (const Value& e : v.GetArray()) {
      KILN_RETURN_IF_ERROR(read_elements(e, out, n, at, where, depth + 1));
    }
    return Status();
  }
  if (at >= n) {
    return invalid_argument_error(
        fmt::format("{}: data holds more than the {} elements its shape says", where, n));
  }
  KILN_RETURN_IF_ERROR(convert<T>(v, out[at], where, at));
  ++at;
  return Status();
}

// The number of leaf values in (nested) JSON arrays; a scalar counts one.
Result<int64_t> count_elements(const Value& v, std::string_view where, int depth) {
  if (!v.IsArray()) return int64_t{1};
  if (depth > kMaxNesting) {
    return invalid_argument_error(
        fmt::format("{}: data is nested deeper than {} arrays", where, kMaxNesting));
  }
  int64_t n = 0;
  for (const Value& e : v.GetArray()) {
    KILN_ASSIGN_OR_RETURN(int64_t k, count_elements(e, where, depth + 1));
    n += k;
  }
  return n;
}

Status read_json_data(const Value& data, Tensor& t, std::string_view where) {
  const int64_t n = t.numel();
  int64_t at = 0;
  Status s = visit_dtype(t.dtype(), [&]<class T>() -> Status {
    return read_elements<T>(data, t.data<T>(), n, at, where, 0);
  });
  KILN_RETURN_IF_ERROR(s);
  if (at != n) {
    return invalid_argument_error(fmt::format("{}: data holds {} elements, its shape {} needs {}",
                                              where, at, t.shape().to_string(), n));
  }
  return Status();
}

Status read_binary_data(std::string_view bytes, Tensor& t, std::string_view where) {
  if (t.dtype() != DType::kString) {
    if (bytes.size() != t.nbytes()) {
      return invalid_argument_error(
          fmt::format("{}: binary_data_size is {} bytes, but shape {} of {} needs {}", where,
                      bytes.size(), t.shape().to_string(), wire_dtype_name(t.dtype()), t.nbytes()));
    }
    if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    if (t.dtype() == DType::kBool) {
      for (uint8_t& b : std::span(static_cast<uint8_t*>(t.raw_data()), bytes.size())) {
        b = b != 0;
      }
    }
    return Status();
  }
  // BYTES: each element is a 4-byte little-endian length and that many bytes.
  std::string* out = t.data<std::string>();
  size_t pos = 0;
  int64_t i = 0;
  for (; pos < bytes.size() && i < t.numel(); ++i) {
    if (bytes.size() - pos < 4) break;
    uint32_t len = static_cast<uint8_t>(bytes[pos]) | static_cast<uint8_t>(bytes[pos + 1]) << 8 |
                   static_cast<uint8_t>(bytes[pos + 2]) << 16 |
                   static_cast<uint32_t>(static_cast<uint8_t>(bytes[pos + 3])) << 24;
    pos += 4;
    if (bytes.size() - pos < len) {
      return invalid_argument_error(
          fmt::format("{}: BYTES element {} says {} bytes but only {} remain", where, i, len,
                      bytes.size() - pos));
    }
    out[i].assign(bytes.data() + pos, len);
    pos += len;
  }
  if (i != t.numel() || pos != bytes.size()) {
    return invalid_argument_error(
        fmt::format("{}: binary BYTES data does not hold exactly {} length-prefixed elements",
                    where, t.numel()));
  }
  return Status();
}

// Reads one tensor object ({name, shape, datatype, parameters, data}); binary data, when the
// tensor has binary_data_size, comes from `binary` at `offset`.
// `streamed`, when given, holds the tensor's "data" values (parse_request_json), and "data" in
// `obj` is null.
Result<InferTensor> parse_tensor(const Value& obj, std::string_view kind, size_t index,
                                 std::string_view binary, size_t& offset,
                                 const DecodeLimits& limits, const JsonData* streamed = nullptr) {
  if (!obj.IsObject()) {
    return invalid_argument_error(fmt::format("{} {} must be an object", kind, index));
  }
  const Value* name = member(obj, "name");
  if (name == nullptr || !name->IsString()) {
    return invalid_argument_error(fmt::format("{} {} needs a string \"name\"", kind, index));
  }
  InferTensor t;
  t.name = std::string(sv(*name));
  const std::string where = fmt::format("{} \"{}\"", kind, t.name);
  const Value* datatype = member(obj, "datatype");
  if (datatype == nullptr || !datatype->IsString()) {
    return invalid_argument_error(
        fmt::format("{} needs a string \"datatype\" (FP32, INT64, "
                    "BYTES, ...)",
                    where));
  }
  std::optional<DType> dtype = parse_wire_dtype(sv(*datatype));
  if (!dtype) {
    return invalid_argument_error(fmt::format(
        "{}: datatype \"{}\" is not one of BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, "
        "FP64, BYTES",
        where, sv(*datatype)));
  }
  const Value* shape = member(obj, "shape");
  if (shape == nullptr || !shape->IsArray()) {
    return invalid_argument_error(fmt::format("{} needs a \"shape\" array", where));
  }
  std::vector<int64_t> dims;
  for (const Value& d : shape->GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) {
      return invalid_argument_error(
          fmt::format("{}: shape dims must be non-negative integers", where));
    }
    dims.push_back(d.GetInt64());
  }
  Shape s(dims);
  Result<int64_t> numel = s.checked_numel(limits.max_elements);
  if (!numel.ok()) {
    return resource_exhausted_error(
        fmt::format("{}: shape {} holds more than the {} elements a tensor may have", where,
                    dims_to_string(dims), limits.max_elements));
  }
  if (const Value* p = member(obj, "parameters")) {
    KILN_RETURN_IF_ERROR(parse_parameter_object(*p, t.parameters, where));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> binary_size,
                        t.parameters.get_int("binary_data_size"));
  t.parameters.erase("binary_data_size");
  const Value* data = member(obj, "data");
  if (binary_size) {
    if (*binary_size < 0 || static_cast<uint64_t>(*binary_size) > binary.size() - offset) {
      return invalid_argument_error(
          fmt::format("{}: binary_data_size {} runs past the {} binary bytes after the JSON header",
                      where, *binary_size, binary.size() - offset));
    }
    if (*dtype != DType::kString &&
        static_cast<uint64_t>(*binary_size) != static_cast<uint64_t>(*numel) * dtype_size(*dtype)) {
      return invalid_argument_error(fmt::format(
          "{}: binary_data_size is {} bytes, but shape {} of {} needs {}", where, *binary_size,
          dims_to_string(dims), sv(*datatype), *numel * static_cast<int64_t>(dtype_size(*dtype))));
    }
    if (*dtype == DType::kString && *numel > *binary_size / 4) {
      return invalid_argument_error(
          fmt::format("{}: binary_data_size {} cannot hold {} BYTES elements of 4 bytes or more",
                      where, *binary_size, *numel));
    }
  } else if (data == nullptr) {
    return invalid_argument_error(
        fmt::format("{} has no \"data\" (nor a binary_data_size parameter)", where));
  } else {
    // The element count is checked before allocating, so a small body cannot make the server
    // allocate a huge tensor.
    int64_t count = 0;
    if (streamed != nullptr) {
      count = streamed->size();
    } else {
      KILN_ASSIGN_OR_RETURN(count, count_elements(*data, where, 0));
    }
    if (count != *numel) {
      return invalid_argument_error(fmt::format("{}: data holds {} elements, its shape {} needs {}",
                                                where, count, dims_to_string(dims), *numel));
    }
  }
  // Binary data fills every byte of the tensor: no zeroing pass first.
  KILN_ASSIGN_OR_RETURN(t.data, binary_size ? Tensor::allocate_uninitialized(*dtype, std::move(s))
                                            : Tensor::allocate(*dtype, std::move(s)));
  if (binary_size) {
    KILN_RETURN_IF_ERROR(
        read_binary_data(binary.substr(offset, static_cast<size_t>(*binary_size)), t.data, where));
    offset += static_cast<size_t>(*binary_size);
  } else if (streamed != nullptr) {
    Tensor& out = t.data;
    KILN_RETURN_IF_ERROR(visit_dtype(
        out.dtype(), [&]<class T>() -> Status { return streamed->read<T>(out.data<T>(), where); }));
  } else {
    KILN_RETURN_IF_ERROR(read_json_data(*data, t.data, where));
  }
  return t;
}

Status split_body(std::string_view body, std::optional<size_t> json_size, std::string_view& json,
                  std::string_view& binary) {
  if (!json_size) {
    json = body;
    binary = {};
    return Status();
  }
  if (*json_size == 0 || *json_size > body.size()) {
    return invalid_argument_error(fmt::format(
        "Inference-Header-Content-Length is {} but the body holds {} bytes; it must be the size "
        "of the JSON part (1..{})",
        *json_size, body.size(), body.size()));
  }
  json = body.substr(0, *json_size);
  binary = body.substr(*json_size);
  return Status();
}

Status check_all_binary_used(std::string_view binary, size_t offset) {
  if (offset != binary.size()) {
    return invalid_argument_error(fmt::format(
        "the body holds {} binary bytes after the JSON header, but the tensors' binary_data_size "
        "add up to {}",
        binary.size(), offset));
  }
  return Status();
}

void write_json_data(JsonWriter& w, const Tensor& t) {
  w.StartArray();
  visit_dtype(t.dtype(), [&]<class T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        w.Bool(p[i]);
      } else if constexpr (std::is_same_v<T, std::string>) {
        w.String(p[i].data(), static_cast<rapidjson::SizeType>(p[i].size()));
      } else if constexpr (std::is_same_v<T, uint64_t>) {
        w.Uint64(p[i]);
      } else if constexpr (std::is_integral_v<T>) {
        w.Int64(static_cast<int64_t>(p[i]));
      } else {
        w.Double(static_cast<double>(static_cast<float>(p[i])));
      }
    }
  });
  w.EndArray();
}

// The raw bytes of a tensor (BYTES elements length-prefixed).
void append_binary(std::string& out, const Tensor& t) {
  if (t.dtype() != DType::kString) {
    out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
    return;
  }
  for (const std::string& s : t.span<std::string>()) {
    uint32_t n = static_cast<uint32_t>(s.size());
    char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                   static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.append(len, 4);
    out.append(s);
  }
}

size_t binary_size(const Tensor& t) {
  if (t.dtype() != DType::kString) return t.nbytes();
  size_t n = 0;
  for (const std::string& s : t.span<std::string>()) n += 4 + s.size();
  return n;
}

void write_tensor(JsonWriter& w, const InferTensor& t, bool binary, std::string& tail) {
  w.StartObject();
  w.Key("name");
  w.String(t.name.data(), static_cast<rapidjson::SizeType>(t.name.size()));
  w.Key("datatype");
  std::string_view dt = wire_dtype_name(t.data.dtype());
  w.String(dt.data(), static_cast<rapidjson::SizeType>(dt.size()));
  w.Key("shape");
  w.StartArray();
  for (int64_t d : t.data.shape()) w.Int64(d);
  w.EndArray();
  if (binary || !t.parameters.empty()) {
    Parameters p = t.parameters;
    if (binary) p.set("binary_data_size", static_cast<int64_t>(binary_size(t.data)));
    w.Key("parameters");
    write_parameters(w, p);
  }
  if (binary) {
    append_binary(tail, t.data);
  } else {
    w.Key("data");
    write_json_data(w, t.data);
  }
  w.EndObject();
}

EncodedBody finish(rapidjson::StringBuffer& buffer, std::string&& tail, bool any_binary) {
  EncodedBody out;
  out.body.reserve(buffer.GetSize() + tail.size());
  out.body.assign(buffer.GetString(), buffer.GetSize());
  if (any_binary) {
    out.json_size = out.body.size();
    out.body += tail;
  }
  return out;
}

}  // namespace

bool OutputEncoding::is_binary(std::string_view name) const {
  auto it = binary.find(name);
  return it == binary.end() ? binary_by_default : it->second;
}

bool OutputEncoding::json_requested(std::string_view name) const {
  auto it = binary.find(name);
  return it == binary.end() ? default_given && !binary_by_default : !it->second;
}

int64_t first_invalid_utf8(const Tensor& strings) {
  std::span<const std::string> elements = strings.span<std::string>();
  for (size_t i = 0; i < elements.size(); ++i) {
    if (!valid_utf8(elements[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

Result<InferenceRequest> decode_infer_request(std::string_view body,
                                              std::optional<size_t> json_size,
                                              const DecodeLimits& limits,
                                              OutputEncoding* encoding) {
  std::string_view json, binary;
  KILN_RETURN_IF_ERROR(split_body(body, json_size, json, binary));
  // The inputs' data arrays are streamed into compact buffers, not built as DOM values: a JSON
  // request then peaks at a few times its size, not ten (issue 28).
  rapidjson::Document doc;
  std::vector<JsonData> data;
  KILN_RETURN_IF_ERROR(parse_request_json(json, doc, data, kMaxNesting, "the inference request"));
  if (!doc.IsObject()) {
    return invalid_argument_error("the inference request must be a JSON object with \"inputs\"");
  }
  InferenceRequest r;
  if (const Value* id = member(doc, "id")) {
    if (!id->IsString()) return invalid_argument_error("request \"id\" must be a string");
    r.id = std::string(sv(*id));
  }
  if (const Value* p = member(doc, "parameters")) {
    KILN_RETURN_IF_ERROR(parse_parameter_object(*p, r.parameters, "request"));
  }
  const Value* inputs = member(doc, "inputs");
  if (inputs == nullptr || !inputs->IsArray()) {
    return invalid_argument_error("the inference request needs an \"inputs\" array");
  }
  if (static_cast<int64_t>(inputs->Size()) > limits.max_tensors) {
    return invalid_argument_error(fmt::format("the request has {} inputs; at most {} are allowed",
                                              inputs->Size(), limits.max_tensors));
  }
  size_t offset = 0;
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i) {
    const JsonData* streamed = i < data.size() ? &data[i] : nullptr;
    KILN_ASSIGN_OR_RETURN(InferTensor t,
                          parse_tensor((*inputs)[i], "input", i, binary, offset, limits, streamed));
    r.inputs.push_back(std::move(t));
    if (streamed != nullptr) data[i] = JsonData();  // its memory back as soon as it is converted
  }
  KILN_RETURN_IF_ERROR(check_all_binary_used(binary, offset));
  OutputEncoding enc;
  KILN_ASSIGN_OR_RETURN(std::optional<bool> binary_output,
                        r.parameters.get_bool("binary_data_output"));
  enc.binary_by_default = binary_output.value_or(false);
  enc.default_given = binary_output.has_value();
  if (const Value* outputs = member(doc, "outputs")) {
    if (!outputs->IsArray()) return invalid_argument_error("request \"outputs\" must be an array");
    for (const Value& o : outputs->GetArray()) {
      const Value* name = o.IsObject() ? member(o, "name") : nullptr;
      if (name == nullptr || !name->IsString()) {
        return invalid_argument_error("every requested output needs a string \"name\"");
      }
      RequestedOutput out;
      out.name = std::string(sv(*name));
      if (const Value* p = member(o, "parameters")) {
        KILN_RETURN_IF_ERROR(
            parse_parameter_object(*p, out.parameters, fmt::format("output \"{}\"", out.name)));
      }
      KILN_ASSIGN_OR_RETURN(std::optional<bool> b, out.parameters.get_bool("binary_data"));
      if (b) enc.binary[out.name] = *b;
      r.outputs.push_back(std::move(out));
    }
  }
  if (encoding != nullptr) *encoding = std::move(enc);
  return r;
}

Result<EncodedBody> encode_infer_response(const InferenceResponse& response,
                                          const OutputEncoding& encoding) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  std::string tail;
  bool any_binary = false;
  w.StartObject();
  write_string(w, "model_name", response.model);
  write_string(w, "model_version", response.version);
  write_string(w, "id", response.id);
  if (!response.parameters.empty()) {
    w.Key("parameters");
    write_parameters(w, response.parameters);
  }
  w.Key("outputs");
  w.StartArray();
  for (const InferTensor& t : response.outputs) {
    bool binary = encoding.is_binary(t.name);
    if (!binary && t.data.dtype() == DType::kString) {
      if (const int64_t bad = first_invalid_utf8(t.data); bad >= 0) {
        if (encoding.json_requested(t.name)) {
          return invalid_argument_error(fmt::format(
              "output \"{}\": BYTES element {} is not valid UTF-8, so it cannot be sent as a "
              "JSON string; request the output with \"parameters\": {{\"binary_data\": true}} "
              "(the binary tensor data extension)",
              t.name, bad));
        }
        binary = true;  // JSON strings must be UTF-8: the bytes go after the JSON instead
      }
    }
    any_binary = any_binary || binary;
    write_tensor(w, t, binary, tail);
  }
  w.EndArray();
  w.EndObject();
  return finish(buffer, std::move(tail), any_binary);
}

EncodedBody encode_infer_request(const InferenceRequest& request, bool binary_inputs,
                                 bool binary_outputs) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  std::string tail;
  w.StartObject();
  if (!request.id.empty()) write_string(w, "id", request.id);
  Parameters p = request.parameters;
  if (binary_outputs) p.set("binary_data_output", true);
  if (!p.empty()) {
    w.Key("parameters");
    write_parameters(w, p);
  }
  w.Key("inputs");
  w.StartArray();
  bool any_binary = false;
  for (const InferTensor& t : request.inputs) {
    const bool binary =
        binary_inputs || (t.data.dtype() == DType::kString && first_invalid_utf8(t.data) >= 0);
    any_binary = any_binary || binary;
    write_tensor(w, t, binary, tail);
  }
  w.EndArray();
  if (!request.outputs.empty()) {
    w.Key("outputs");
    w.StartArray();
    for (const RequestedOutput& o : request.outputs) {
      w.StartObject();
      write_string(w, "name", o.name);
      if (!o.parameters.empty()) {
        w.Key("parameters");
        write_parameters(w, o.parameters);
      }
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return finish(buffer, std::move(tail), any_binary);
}

Result<InferenceResponse> decode_infer_response(std::string_view body,
                                                std::optional<size_t> json_size,
                                                const DecodeLimits& limits) {
  std::string_view json, binary;
  KILN_RETURN_IF_ERROR(split_body(body, json_size, json, binary));
  rapidjson::Document doc;
  KILN_RETURN_IF_ERROR(parse_json(json, doc, "the inference response"));
  if (!doc.IsObject()) return invalid_argument_error("the inference response is not an object");
  if (const Value* e = member(doc, "error"); e != nullptr && e->IsString()) {
    return unknown_error(std::string(sv(*e)));
  }
  InferenceResponse r;
  if (const Value* v = member(doc, "model_name"); v && v->IsString()) r.model = sv(*v);
  if (const Value* v = member(doc, "model_version"); v && v->IsString()) r.version = sv(*v);
  if (const Value* v = member(doc, "id"); v && v->IsString()) r.id = sv(*v);
  if (const Value* p = member(doc, "parameters")) {
    KILN_RETURN_IF_ERROR(parse_parameter_object(*p, r.parameters, "response"));
  }
  const Value* outputs = member(doc, "outputs");
  if (outputs == nullptr || !outputs->IsArray()) {
    return invalid_argument_error("the inference response has no \"outputs\" array");
  }
  size_t offset = 0;
  for (rapidjson::SizeType i = 0; i < outputs->Size(); ++i) {
    KILN_ASSIGN_OR_RETURN(InferTensor t,
                          parse_tensor((*outputs)[i], "output", i, binary, offset, limits));
    r.outputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(check_all_binary_used(binary, offset));
  return r;
}

}  // namespace kiln::server::http
