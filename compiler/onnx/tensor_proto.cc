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
    {TensorProto::FLOAT, DType::kF32},
    {TensorProto::FLOAT16, DType::kF16},
    {TensorProto::BFLOAT16, DType::kBF16},
    {TensorProto::DOUBLE, DType::kF64},
    {TensorProto::INT8, DType::kI8},
    {TensorProto::UINT8, DType::kU8},
    {TensorProto::INT16, DType::kI16},
    {TensorProto::UINT16, DType::kU16},
    {TensorProto::INT32, DType::kI32},
    {TensorProto::UINT32, DType::kU32},
    {TensorProto::INT64, DType::kI64},
    {TensorProto::UINT64, DType::kU64},
    {TensorProto::BOOL, DType::kBool},
    {TensorProto::STRING, DType::kString},
    // The codes of onnx.proto's newer types (libonnx-dev's generated enum may predate them).
    {17, DType::kF8E4M3FN},
    {18, DType::kF8E4M3FNUZ},
    {19, DType::kF8E5M2},
    {20, DType::kF8E5M2FNUZ},
    {21, DType::kU4},
    {22, DType::kI4},
    {23, DType::kF4E2M1},
    {24, DType::kF8E8M0},
    {25, DType::kU2},
    {26, DType::kI2},
};

// How many elements ONNX packs into one byte: 2 of the 4-bit types, 4 of the 2-bit ones (first
// element in the lowest bits); 1 for everything else. kiln tensors hold one element per byte.
int64_t elements_per_byte(DType dtype) {
  const int bits = dtype_bits(dtype);
  return bits > 0 && bits < 8 ? 8 / bits : 1;
}

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
      for (int i = 0; i < field.size(); ++i)
        out[i] = T::from_bits(static_cast<uint16_t>(field.Get(i)));
    } else if constexpr (requires { T::from_bits(uint8_t{0}); }) {
      // The narrow types in int32_data hold the raw bits (packed types are unpacked before).
      for (int i = 0; i < field.size(); ++i) {
        out[i] = T::from_bits(static_cast<uint8_t>(field.Get(i)));
      }
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
      (length >= 0 &&
       static_cast<uint64_t>(length) > file->size() - static_cast<uint64_t>(offset))) {
    return invalid_argument_error(
        fmt::format("{}: external data range [{}, +{}) lies outside \"{}\" ({} bytes)", what,
                    offset, length, path.string(), file->size()));
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
    return unimplemented_error(
        fmt::format("{}: ONNX element type {} is not supported", what, proto.data_type()));
  }
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  Shape shape(std::move(dims));
  Result<int64_t> numel = shape.checked_numel(int64_t{1} << 40);
  if (!numel.ok()) return numel.status().with_context(what);
  const bool external = proto.data_location() == TensorProto::EXTERNAL;
  // Every size check comes before the allocation: a shape declaring gigabytes over a few bytes of
  // data is refused without reserving them.
  if (*dtype == DType::kString) {
    if (static_cast<int64_t>(proto.string_data_size()) != *numel) {
      return invalid_argument_error(fmt::format("{}: holds {} strings but its shape {} needs {}",
                                                what, proto.string_data_size(), shape.to_string(),
                                                *numel));
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*dtype, shape));
    std::string* out = t.data<std::string>();
    for (int i = 0; i < proto.string_data_size(); ++i) out[i] = proto.string_data(i);
    return t;
  }
  const int64_t per_byte = elements_per_byte(*dtype);
  const int64_t packed_size = (*numel + per_byte - 1) / per_byte;

  if (external || proto.has_raw_data()) {
    std::string external_bytes;
    const std::string* raw = &proto.raw_data();
    if (external) {
      KILN_ASSIGN_OR_RETURN(external_bytes, read_external(proto, external_dir, what));
      raw = &external_bytes;
    }
    const auto needed = static_cast<size_t>(
        per_byte > 1 ? packed_size : *numel * static_cast<int64_t>(dtype_size(*dtype)));
    if (raw->size() != needed) {
      return invalid_argument_error(fmt::format("{}: has {} bytes of data but {} of {} needs {}",
                                                what, raw->size(), shape.to_string(),
                                                dtype_name(*dtype), needed));
    }
    // The data fills every element: no zeroing pass first.
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(*dtype, shape));
    if (per_byte > 1) {
      unpack_narrow(reinterpret_cast<const uint8_t*>(raw->data()), *numel, per_byte,
                    static_cast<uint8_t*>(t.raw_data()));
      return t;
    }
    if (!raw->empty()) std::memcpy(t.raw_data(), raw->data(), raw->size());
    if (*dtype == DType::kBool) {
      auto* b = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < *numel; ++i) b[i] = b[i] != 0;
    }
    return t;
  }

  if (per_byte > 1) {
    // int32_data holds the packed bytes, one per value.
    if (proto.int32_data_size() != packed_size) {
      return invalid_argument_error(fmt::format(
          "{}: holds {} values but {} of {} packs into {} ({} per value)", what,
          proto.int32_data_size(), shape.to_string(), dtype_name(*dtype), packed_size, per_byte));
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(*dtype, shape));
    std::vector<uint8_t> packed(proto.int32_data().begin(), proto.int32_data().end());
    unpack_narrow(packed.data(), *numel, per_byte, static_cast<uint8_t*>(t.raw_data()));
    return t;
  }
  int64_t held = 0;
  switch (*dtype) {
    case DType::kF32: held = proto.float_data_size(); break;
    case DType::kF64: held = proto.double_data_size(); break;
    case DType::kI64: held = proto.int64_data_size(); break;
    case DType::kU32:
    case DType::kU64: held = proto.uint64_data_size(); break;
    default: held = proto.int32_data_size(); break;
  }
  if (held != *numel) {
    return invalid_argument_error(fmt::format("{}: holds {} values but its shape {} needs {}", what,
                                              held, shape.to_string(), *numel));
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(*dtype, shape));
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
  const int64_t per_byte = elements_per_byte(tensor.dtype());
  if (per_byte > 1) {
    proto->set_raw_data(
        pack_narrow(static_cast<const uint8_t*>(tensor.raw_data()), tensor.numel(), per_byte));
    return;
  }
  proto->set_raw_data(tensor.raw_data(), tensor.nbytes());
}

void unpack_narrow(const uint8_t* packed, int64_t numel, int64_t per_byte, uint8_t* out) {
  const int bits = static_cast<int>(8 / per_byte);
  const auto mask = static_cast<uint8_t>((1u << bits) - 1);
  for (int64_t i = 0; i < numel; ++i) {
    const auto shift = static_cast<int>(i % per_byte) * bits;
    out[i] = static_cast<uint8_t>((packed[i / per_byte] >> shift) & mask);
  }
}

std::string pack_narrow(const uint8_t* values, int64_t numel, int64_t per_byte) {
  const int bits = static_cast<int>(8 / per_byte);
  const auto mask = static_cast<uint8_t>((1u << bits) - 1);
  std::string packed(static_cast<size_t>((numel + per_byte - 1) / per_byte), '\0');
  for (int64_t i = 0; i < numel; ++i) {
    const auto shift = static_cast<int>(i % per_byte) * bits;
    auto& byte = reinterpret_cast<uint8_t&>(packed[static_cast<size_t>(i / per_byte)]);
    byte = static_cast<uint8_t>(byte | ((values[i] & mask) << shift));
  }
  return packed;
}

}  // namespace kiln::compiler
