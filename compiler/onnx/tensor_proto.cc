// SPDX-License-Identifier: Apache-2.0
// TensorProto decoding (raw, typed fields, external data) and encoding.
#include "compiler/onnx/tensor_proto.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>

#include "core/mapped_file.h"

namespace kiln::compiler {

namespace {
using onnx::TensorProto;

struct TypeMap {
  int32_t onnx;
  DType dtype;
};
constexpr TypeMap kTypes[] = {
    {TensorProto::FLOAT, DType::kF32},   {TensorProto::FLOAT16, DType::kF16},
    {TensorProto::BFLOAT16, DType::kBF16}, {TensorProto::DOUBLE, DType::kF64},
    {TensorProto::INT8, DType::kI8},     {TensorProto::UINT8, DType::kU8},
    {TensorProto::INT16, DType::kI16},   {TensorProto::UINT16, DType::kU16},
    {TensorProto::INT32, DType::kI32},   {TensorProto::UINT32, DType::kU32},
    {TensorProto::INT64, DType::kI64},   {TensorProto::UINT64, DType::kU64},
    {TensorProto::BOOL, DType::kBool},   {TensorProto::STRING, DType::kString},
};

// Copies typed repeated-field values into the tensor, converting to the element type.
template <class Field>
Status copy_field(const Field& field, Tensor& t, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != t.numel()) {
    return invalid_argument_error(fmt::format("{}: holds {} values but its shape {} needs {}", what,
                                              field.size(), t.shape().to_string(), t.numel()));
  }
  visit_dtype(t.dtype(), [&]<class T>() {
    T* out = t.data<T>();
    if constexpr (std::is_same_v<T, std::string>) {
      // not reached: strings use string_data
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      // f16/bf16 in int32_data hold the raw 16 bits.
      for (int i = 0; i < field.size(); ++i) out[i] = T::from_bits(static_cast<uint16_t>(field.Get(i)));
    } else {
      for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
    }
  });
  return Status();
}

Result<std::string> read_external(const TensorProto& proto, const std::string& dir,
                                  const std::string& what) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  if (location.empty()) {
    return invalid_argument_error(fmt::format("{}: external data without a location", what));
  }
  std::filesystem::path path = std::filesystem::path(dir) / location;
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path.string()));
  if (offset < 0 || static_cast<uint64_t>(offset) > file->size() ||
      (length >= 0 && static_cast<uint64_t>(length) > file->size() - static_cast<uint64_t>(offset))) {
    return invalid_argument_error(fmt::format(
        "{}: external data range [{}, +{}) lies outside \"{}\" ({} bytes)", what, offset, length,
        path.string(), file->size()));
  }
  size_t n = length >= 0 ? static_cast<size_t>(length) : file->size() - static_cast<size_t>(offset);
  return std::string(reinterpret_cast<const char*>(file->data()) + offset, n);
}
}  // namespace

std::optional<DType> dtype_from_onnx(int32_t onnx_type) {
  for (const TypeMap& m : kTypes) {
    if (m.onnx == onnx_type) return m.dtype;
  }
  return std::nullopt;
}

int32_t dtype_to_onnx(DType dtype) {
  for (const TypeMap& m : kTypes) {
    if (m.dtype == dtype) return m.onnx;
  }
  return TensorProto::UNDEFINED;
}

Result<Tensor> tensor_from_proto(const TensorProto& proto, const std::string& external_dir,
                                 const std::string& what) {
  std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    return unimplemented_error(fmt::format("{}: ONNX element type {} is not supported", what,
                                           proto.data_type()));
  }
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  Shape shape(std::move(dims));
  Result<int64_t> numel = shape.checked_numel(int64_t{1} << 40);
  if (!numel.ok()) return numel.status().with_context(what);
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*dtype, shape));

  if (*dtype == DType::kString) {
    if (static_cast<int64_t>(proto.string_data_size()) != *numel) {
      return invalid_argument_error(fmt::format("{}: holds {} strings but its shape {} needs {}",
                                                what, proto.string_data_size(), shape.to_string(),
                                                *numel));
    }
    std::string* out = t.data<std::string>();
    for (int i = 0; i < proto.string_data_size(); ++i) out[i] = proto.string_data(i);
    return t;
  }

  const bool external = proto.data_location() == TensorProto::EXTERNAL;
  if (external || proto.has_raw_data()) {
    std::string external_bytes;
    const std::string* raw = &proto.raw_data();
    if (external) {
      KILN_ASSIGN_OR_RETURN(external_bytes, read_external(proto, external_dir, what));
      raw = &external_bytes;
    }
    if (raw->size() != t.nbytes()) {
      return invalid_argument_error(fmt::format("{}: has {} bytes of data but {} of {} needs {}",
                                                what, raw->size(), shape.to_string(),
                                                dtype_name(*dtype), t.nbytes()));
    }
    if (!raw->empty()) std::memcpy(t.raw_data(), raw->data(), raw->size());
    if (*dtype == DType::kBool) {
      auto* b = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < *numel; ++i) b[i] = b[i] != 0;
    }
    return t;
  }

  switch (*dtype) {
    case DType::kF32: KILN_RETURN_IF_ERROR(copy_field(proto.float_data(), t, what)); break;
    case DType::kF64: KILN_RETURN_IF_ERROR(copy_field(proto.double_data(), t, what)); break;
    case DType::kI64: KILN_RETURN_IF_ERROR(copy_field(proto.int64_data(), t, what)); break;
    case DType::kU32:
    case DType::kU64: KILN_RETURN_IF_ERROR(copy_field(proto.uint64_data(), t, what)); break;
    default: KILN_RETURN_IF_ERROR(copy_field(proto.int32_data(), t, what)); break;
  }
  return t;
}

void tensor_to_proto(const Tensor& tensor, TensorProto* proto) {
  proto->Clear();
  proto->set_data_type(dtype_to_onnx(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto->add_dims(d);
  if (tensor.dtype() == DType::kString) {
    for (const std::string& s : tensor.span<std::string>()) proto->add_string_data(s);
    return;
  }
  proto->set_raw_data(tensor.raw_data(), tensor.nbytes());
}

}  // namespace kiln::compiler
