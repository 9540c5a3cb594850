// SPDX-License-Identifier: Apache-2.0
// Conversions between the KServe v2 gRPC messages and server/core's types.
#include "server/grpc/grpc_convert.h"

#include <fmt/format.h>
#include <grpcpp/support/slice.h>

#include <cstring>
#include <limits>
#include <type_traits>

namespace kiln::server::grpc {

namespace {

using google::protobuf::RepeatedField;
using google::protobuf::RepeatedPtrField;
using inference::InferTensorContents;

// Calls fn(field) with the typed contents field that holds elements of type T (int_contents for
// int8/int16/int32, ...); returns false for FP16 and BF16, which have none.
template <class T, class Contents, class F>
bool with_field(Contents& c, F&& fn) {
  if constexpr (std::is_same_v<T, bool>) {
    fn(*c.mutable_bool_contents());
  } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
                       std::is_same_v<T, int32_t>) {
    fn(*c.mutable_int_contents());
  } else if constexpr (std::is_same_v<T, int64_t>) {
    fn(*c.mutable_int64_contents());
  } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t> ||
                       std::is_same_v<T, uint32_t>) {
    fn(*c.mutable_uint_contents());
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    fn(*c.mutable_uint64_contents());
  } else if constexpr (std::is_same_v<T, float>) {
    fn(*c.mutable_fp32_contents());
  } else if constexpr (std::is_same_v<T, double>) {
    fn(*c.mutable_fp64_contents());
  } else if constexpr (std::is_same_v<T, std::string>) {
    fn(*c.mutable_bytes_contents());
  } else {
    return false;
  }
  return true;
}

// How many elements each typed field holds, to reject contents in a field the dtype does not use.
int total_contents(const InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
         c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
         c.fp64_contents_size() + c.bytes_contents_size();
}

// The typed fields that hold elements, e.g. "int_contents (64)".
std::string filled_fields(const InferTensorContents& c) {
  std::string out;
  auto add = [&](std::string_view name, int n) {
    if (n == 0) return;
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", name, n);
  };
  add("bool_contents", c.bool_contents_size());
  add("int_contents", c.int_contents_size());
  add("int64_contents", c.int64_contents_size());
  add("uint_contents", c.uint_contents_size());
  add("uint64_contents", c.uint64_contents_size());
  add("fp32_contents", c.fp32_contents_size());
  add("fp64_contents", c.fp64_contents_size());
  add("bytes_contents", c.bytes_contents_size());
  return out.empty() ? "no field" : out;
}

std::string_view field_name(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool_contents";
    case DType::kI8:
    case DType::kI16:
    case DType::kI32: return "int_contents";
    case DType::kI64: return "int64_contents";
    case DType::kU8:
    case DType::kU16:
    case DType::kU32: return "uint_contents";
    case DType::kU64: return "uint64_contents";
    case DType::kF32: return "fp32_contents";
    case DType::kF64: return "fp64_contents";
    case DType::kString: return "bytes_contents";
    default: return "raw contents only";
  }
}

// Raw bytes into `t`: the elements themselves, or for BYTES a 4-byte little-endian length before
// each element.
Status read_raw(const std::string& bytes, Tensor& t, std::string_view where) {
  if (t.dtype() != DType::kString) {
    if (bytes.size() != t.nbytes()) {
      return invalid_argument_error(
          fmt::format("{}: raw contents hold {} bytes, but shape {} of {} needs {}", where,
                      bytes.size(), t.shape().to_string(), wire_dtype_name(t.dtype()), t.nbytes()));
    }
    if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    return Status();
  }
  std::string* out = t.data<std::string>();
  size_t at = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (bytes.size() - at < 4) {
      return invalid_argument_error(
          fmt::format("{}: raw BYTES contents end before element {} of {}", where, i, t.numel()));
    }
    uint32_t len;
    std::memcpy(&len, bytes.data() + at, 4);
    at += 4;
    if (bytes.size() - at < len) {
      return invalid_argument_error(
          fmt::format("{}: raw BYTES element {} says {} bytes but only {} remain", where, i, len,
                      bytes.size() - at));
    }
    out[i].assign(bytes.data() + at, len);
    at += len;
  }
  if (at != bytes.size()) {
    return invalid_argument_error(
        fmt::format("{}: raw BYTES contents hold {} bytes after the {} length-prefixed elements",
                    where, bytes.size() - at, t.numel()));
  }
  return Status();
}

void write_raw(const Tensor& t, std::string* out) {
  if (t.dtype() != DType::kString) {
    out->assign(static_cast<const char*>(t.raw_data()), t.nbytes());
    return;
  }
  size_t n = 0;
  for (const std::string& s : t.span<std::string>()) n += 4 + s.size();
  out->clear();
  out->reserve(n);
  for (const std::string& s : t.span<std::string>()) {
    uint32_t len = static_cast<uint32_t>(s.size());
    out->append(reinterpret_cast<const char*>(&len), 4);
    out->append(s);
  }
}

Status read_typed(const InferTensorContents& contents, Tensor& t, std::string_view where) {
  Status status;
  auto& c = const_cast<InferTensorContents&>(contents);  // with_field is shared with writing
  bool has_field = visit_dtype(t.dtype(), [&]<class T>() {
    return with_field<T>(c, [&](const auto& field) {
      if (field.size() != t.numel() || total_contents(contents) != field.size()) {
        const std::string need = fmt::format("{}: {} of shape {} needs {} elements in {}", where,
                                             wire_dtype_name(t.dtype()), t.shape().to_string(),
                                             t.numel(), field_name(t.dtype()));
        // Elements in another field: name where they are, not only how many there are.
        status = invalid_argument_error(
            total_contents(contents) == field.size()
                ? fmt::format("{}, but the contents hold {}", need, field.size())
                : fmt::format("{}, but {} holds {} and the contents are in {}; {} elements go in "
                              "{}",
                              need, field_name(t.dtype()), field.size(), filled_fields(contents),
                              wire_dtype_name(t.dtype()), field_name(t.dtype())));
        return;
      }
      T* out = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
      }
    });
  });
  if (!has_field) {
    return invalid_argument_error(
        fmt::format("{}: {} has no typed contents field in the protocol; send it in "
                    "raw_input_contents",
                    where, wire_dtype_name(t.dtype())));
  }
  return status;
}

void write_typed(const Tensor& t, InferTensorContents* contents) {
  visit_dtype(t.dtype(), [&]<class T>() {
    return with_field<T>(*contents, [&](auto& field) {
      const T* in = t.data<T>();
      field.Reserve(static_cast<int>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<T, std::string>) {
          *field.Add() = in[i];
        } else {
          field.Add(in[i]);
        }
      }
    });
  });
}

bool has_typed_field(DType dtype) {
  return dtype != DType::kF16 && dtype != DType::kBF16;
}

// Raw contents of at least this many bytes become the tensor's storage (moved out of the
// message; smaller ones are copied into a 64-byte aligned tensor), and are sent as a slice over the
// tensor's storage (smaller ones are copied into the message's bytes).
constexpr size_t kLargeRawBytes = 4096;

// A tensor from its wire description: `raw` when the message carries raw contents for it (large
// raw contents of a fixed-size dtype are moved into the tensor, not copied).
Result<Tensor> read_tensor(std::string_view where, const std::string& datatype,
                           const RepeatedField<int64_t>& shape, bool has_contents,
                           const InferTensorContents& contents, std::string* raw,
                           const GrpcLimits& limits) {
  std::optional<DType> dtype = parse_wire_dtype(datatype);
  if (!dtype) {
    return invalid_argument_error(fmt::format(
        "{}: datatype \"{}\" is not one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, "
        "INT32, INT64, FP16, BF16, FP32, FP64, BYTES",
        where, datatype));
  }
  std::vector<int64_t> dims(shape.begin(), shape.end());
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return invalid_argument_error(
          fmt::format("{}: shape {} has a negative dim", where, dims_to_string(dims)));
    }
    if (d != 0 && numel > limits.max_elements / d) {
      numel = limits.max_elements + 1;
    } else {
      numel *= d;
    }
  }
  if (numel > limits.max_elements) {
    return resource_exhausted_error(
        fmt::format("{}: shape {} holds more than the {} elements a tensor may have", where,
                    dims_to_string(dims), limits.max_elements));
  }
  // The byte and element counts are checked before allocating, so a small message cannot make the
  // server allocate a large tensor.
  const bool bytes = *dtype == DType::kString;
  if (raw != nullptr) {
    if (has_contents && total_contents(contents) > 0) {
      return invalid_argument_error(
          fmt::format("{} has both typed contents and raw contents; send one of them", where));
    }
    const size_t need = static_cast<size_t>(numel) * (bytes ? 4 : dtype_size(*dtype));
    if (bytes ? raw->size() < need : raw->size() != need) {
      return invalid_argument_error(fmt::format(
          "{}: raw contents hold {} bytes, but shape {} of {} needs {}{}", where, raw->size(),
          dims_to_string(dims), wire_dtype_name(*dtype), bytes ? "at least " : "", need));
    }
  } else if (has_typed_field(*dtype) && total_contents(contents) != numel) {
    return invalid_argument_error(
        fmt::format("{}: {} of shape {} needs {} elements in {}, but the contents hold {}", where,
                    wire_dtype_name(*dtype), dims_to_string(dims), numel, field_name(*dtype),
                    total_contents(contents)));
  }
  if (raw != nullptr && !bytes && raw->size() >= kLargeRawBytes) {
    // The parsed message's string is the one copy of the bytes the server makes.
    auto owner = std::make_shared<std::string>(std::move(*raw));
    void* data = owner->data();
    return Tensor::wrap(*dtype, Shape(std::move(dims)), data, std::move(owner));
  }
  KILN_ASSIGN_OR_RETURN(
      Tensor t, raw != nullptr ? Tensor::allocate_uninitialized(*dtype, Shape(std::move(dims)))
                               : Tensor::allocate(*dtype, Shape(std::move(dims))));
  if (raw != nullptr) {
    KILN_RETURN_IF_ERROR(read_raw(*raw, t, where));
  } else {
    KILN_RETURN_IF_ERROR(read_typed(contents, t, where));
  }
  return t;
}

template <class Map>
Status read_parameters(const Map& in, Parameters& out, std::string_view where) {
  for (const auto& [key, value] : in) {
    KILN_ASSIGN_OR_RETURN(
        ParameterValue v,
        from_infer_parameter(value, fmt::format("{}: parameter \"{}\"", where, key)));
    out.set(key, std::move(v));
  }
  return Status();
}

template <class Map>
void write_parameters(const Parameters& in, Map* out) {
  for (const auto& [key, value] : in.values()) to_infer_parameter(value, &(*out)[key]);
}

}  // namespace

::grpc::Status to_grpc_status(const Status& status) {
  if (status.ok()) return ::grpc::Status::OK;
  return ::grpc::Status(static_cast<::grpc::StatusCode>(status.code()),
                        std::string(status.message()));
}

Status from_grpc_status(const ::grpc::Status& status) {
  if (status.ok()) return Status();
  return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
}

Result<ParameterValue> from_infer_parameter(const inference::InferParameter& p,
                                            std::string_view where) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return ParameterValue(p.bool_param());
    case inference::InferParameter::kInt64Param: return ParameterValue(p.int64_param());
    case inference::InferParameter::kStringParam: return ParameterValue(p.string_param());
    case inference::InferParameter::kDoubleParam: return ParameterValue(p.double_param());
    case inference::InferParameter::kUint64Param:
      if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return invalid_argument_error(fmt::format(
            "{}: uint64 value {} is larger than the largest int64", where, p.uint64_param()));
      }
      return ParameterValue(static_cast<int64_t>(p.uint64_param()));
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return invalid_argument_error(fmt::format("{} has no value", where));
}

void to_infer_parameter(const ParameterValue& value, inference::InferParameter* p) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          p->set_bool_param(v);
        } else if constexpr (std::is_same_v<V, int64_t>) {
          p->set_int64_param(v);
        } else if constexpr (std::is_same_v<V, double>) {
          p->set_double_param(v);
        } else {
          p->set_string_param(v);
        }
      },
      value);
}

bool OutputChoice::is_raw(std::string_view name) const {
  auto it = raw.find(name);
  return it == raw.end() ? raw_by_default : it->second;
}

Result<InferenceRequest> decode_request(inference::ModelInferRequest& message,
                                        const GrpcLimits& limits, OutputChoice* choice) {
  InferenceRequest r;
  r.model = message.model_name();
  r.version = message.model_version();
  r.id = message.id();
  KILN_RETURN_IF_ERROR(read_parameters(message.parameters(), r.parameters, "request"));
  if (message.inputs_size() > limits.max_tensors || message.outputs_size() > limits.max_tensors) {
    return resource_exhausted_error(
        fmt::format("the request has {} inputs and {} outputs; at most {} tensors each are allowed",
                    message.inputs_size(), message.outputs_size(), limits.max_tensors));
  }
  const int raw_count = message.raw_input_contents_size();
  if (raw_count != 0 && raw_count != message.inputs_size()) {
    return invalid_argument_error(fmt::format(
        "the request has {} raw_input_contents for {} inputs; send raw contents for every input "
        "or for none",
        raw_count, message.inputs_size()));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<bool> raw_default,
                        r.parameters.get_bool("binary_data_output"));
  r.parameters.erase("binary_data_output");
  if (choice != nullptr && raw_default) choice->raw_by_default = *raw_default;
  r.inputs.reserve(static_cast<size_t>(message.inputs_size()));
  for (int i = 0; i < message.inputs_size(); ++i) {
    const auto& in = message.inputs(i);
    InferTensor t;
    t.name = in.name();
    const std::string where = fmt::format("input \"{}\"", t.name);
    if (t.name.empty()) return invalid_argument_error(fmt::format("input {} has no name", i));
    KILN_RETURN_IF_ERROR(read_parameters(in.parameters(), t.parameters, where));
    KILN_ASSIGN_OR_RETURN(
        t.data, read_tensor(where, in.datatype(), in.shape(), in.has_contents(), in.contents(),
                            raw_count ? message.mutable_raw_input_contents(i) : nullptr, limits));
    r.inputs.push_back(std::move(t));
  }
  for (const auto& out : message.outputs()) {
    RequestedOutput o;
    o.name = out.name();
    KILN_RETURN_IF_ERROR(
        read_parameters(out.parameters(), o.parameters, fmt::format("output \"{}\"", o.name)));
    KILN_ASSIGN_OR_RETURN(std::optional<bool> raw, o.parameters.get_bool("binary_data"));
    o.parameters.erase("binary_data");
    if (choice != nullptr && raw) choice->raw[o.name] = *raw;
    r.outputs.push_back(std::move(o));
  }
  return r;
}

void encode_response(const InferenceResponse& response, const OutputChoice& choice,
                     inference::ModelInferResponse* message) {
  message->set_model_name(response.model);
  message->set_model_version(response.version);
  message->set_id(response.id);
  write_parameters(response.parameters, message->mutable_parameters());
  bool any_raw = false;
  for (const InferTensor& t : response.outputs) {
    any_raw |= choice.is_raw(t.name) || !has_typed_field(t.data.dtype());
  }
  for (const InferTensor& t : response.outputs) {
    auto* out = message->add_outputs();
    out->set_name(t.name);
    out->set_datatype(std::string(wire_dtype_name(t.data.dtype())));
    for (int64_t d : t.data.shape().dims()) out->add_shape(d);
    write_parameters(t.parameters, out->mutable_parameters());
    const bool raw = choice.is_raw(t.name) || !has_typed_field(t.data.dtype());
    // raw_output_contents is indexed like outputs: a typed output leaves its entry empty.
    std::string* bytes = any_raw ? message->add_raw_output_contents() : nullptr;
    if (raw) {
      write_raw(t.data, bytes);
    } else {
      write_typed(t.data, out->mutable_contents());
    }
  }
}

namespace {

// encode_request's fields; with `raw_contents` false, raw inputs get no raw_input_contents entry
// (the caller appends them). Returns whether the inputs go raw.
bool encode_request_fields(const InferenceRequest& request, bool raw_inputs, bool raw_outputs,
                           bool raw_contents, inference::ModelInferRequest* message) {
  message->set_model_name(request.model);
  message->set_model_version(request.version);
  message->set_id(request.id);
  write_parameters(request.parameters, message->mutable_parameters());
  if (!raw_outputs) (*message->mutable_parameters())["binary_data_output"].set_bool_param(false);
  bool raw = raw_inputs;
  for (const InferTensor& t : request.inputs) raw |= !has_typed_field(t.data.dtype());
  for (const InferTensor& t : request.inputs) {
    auto* in = message->add_inputs();
    in->set_name(t.name);
    in->set_datatype(std::string(wire_dtype_name(t.data.dtype())));
    for (int64_t d : t.data.shape().dims()) in->add_shape(d);
    write_parameters(t.parameters, in->mutable_parameters());
    if (!raw) {
      write_typed(t.data, in->mutable_contents());
    } else if (raw_contents) {
      write_raw(t.data, message->add_raw_input_contents());
    }
  }
  for (const RequestedOutput& o : request.outputs) {
    auto* out = message->add_outputs();
    out->set_name(o.name);
    write_parameters(o.parameters, out->mutable_parameters());
  }
  return raw;
}

void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

}  // namespace

void encode_request(const InferenceRequest& request, bool raw_inputs, bool raw_outputs,
                    inference::ModelInferRequest* message) {
  encode_request_fields(request, raw_inputs, raw_outputs, /*raw_contents=*/true, message);
}

::grpc::ByteBuffer encode_request_bytes(const InferenceRequest& request, bool raw_inputs,
                                        bool raw_outputs) {
  inference::ModelInferRequest message;
  const bool raw =
      encode_request_fields(request, raw_inputs, raw_outputs, /*raw_contents=*/false, &message);
  // The message's other fields, then each raw_input_contents entry (field 7, length-delimited) in
  // input order: the fields of a protobuf message may come in any order, a repeated field's
  // entries in theirs. Element bytes travel as slices that hold the tensor's storage.
  constexpr char kRawInputContentsTag = (7 << 3) | 2;
  std::vector<::grpc::Slice> slices;
  std::string pending = message.SerializeAsString();
  for (const InferTensor& t : request.inputs) {
    if (!raw) break;
    pending.push_back(kRawInputContentsTag);
    if (t.data.dtype() == DType::kString || t.data.nbytes() < kLargeRawBytes) {
      std::string bytes;
      write_raw(t.data, &bytes);
      append_varint(pending, bytes.size());
      pending += bytes;
      continue;
    }
    append_varint(pending, t.data.nbytes());
    slices.emplace_back(pending.data(), pending.size());
    pending.clear();
    slices.emplace_back(
        t.data.raw_data(), t.data.nbytes(), [](void* p) { delete static_cast<Tensor*>(p); },
        new Tensor(t.data));
  }
  if (!pending.empty() || slices.empty()) slices.emplace_back(pending.data(), pending.size());
  return ::grpc::ByteBuffer(slices.data(), slices.size());
}

Result<InferenceResponse> decode_response(inference::ModelInferResponse& message,
                                          const GrpcLimits& limits) {
  InferenceResponse r;
  r.model = message.model_name();
  r.version = message.model_version();
  r.id = message.id();
  KILN_RETURN_IF_ERROR(read_parameters(message.parameters(), r.parameters, "response"));
  const int raw_count = message.raw_output_contents_size();
  if (raw_count != 0 && raw_count != message.outputs_size()) {
    return invalid_argument_error(
        fmt::format("the response has {} raw_output_contents for {} outputs", raw_count,
                    message.outputs_size()));
  }
  for (int i = 0; i < message.outputs_size(); ++i) {
    const auto& out = message.outputs(i);
    InferTensor t;
    t.name = out.name();
    const std::string where = fmt::format("output \"{}\"", t.name);
    KILN_RETURN_IF_ERROR(read_parameters(out.parameters(), t.parameters, where));
    // An output with typed contents leaves its raw entry empty.
    const bool typed = out.has_contents() && total_contents(out.contents()) > 0;
    std::string* raw = raw_count && !typed ? message.mutable_raw_output_contents(i) : nullptr;
    KILN_ASSIGN_OR_RETURN(t.data, read_tensor(where, out.datatype(), out.shape(),
                                              out.has_contents(), out.contents(), raw, limits));
    r.outputs.push_back(std::move(t));
  }
  return r;
}

}  // namespace kiln::server::grpc
