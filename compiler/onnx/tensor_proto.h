// SPDX-License-Identifier: Apache-2.0
// Conversion between onnx::TensorProto and kiln tensors, and ONNX element-type codes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace onnx {
class TensorProto;
}

namespace kiln::compiler {

// The DType of an ONNX TensorProto::DataType code, or nullopt (complex, undefined).
std::optional<DType> dtype_from_onnx(int32_t onnx_type);
int32_t dtype_to_onnx(DType dtype);

// Decodes a TensorProto (raw_data or typed fields; external data read from `external_dir`).
// `what` names the tensor in errors. The 4- and 2-bit types, which ONNX packs 2 or 4 to a byte
// (in raw_data and in int32_data, one packed byte per value), are unpacked to one per byte.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& external_dir,
                                 const std::string& what);
// Encodes a tensor (raw_data for numbers, packed for the 4- and 2-bit types; string_data for
// strings).
void tensor_to_proto(const Tensor& tensor, onnx::TensorProto* proto);

// ONNX's packing of the 4- and 2-bit types: `per_byte` (2 or 4) elements of 8 / per_byte bits to
// a byte, the first in the lowest bits; the last byte's unused bits are 0. `values` and `out` hold
// one element per byte in its low bits (higher bits are ignored when packing).
void unpack_narrow(const uint8_t* packed, int64_t numel, int64_t per_byte, uint8_t* out);
std::string pack_narrow(const uint8_t* values, int64_t numel, int64_t per_byte);

}  // namespace kiln::compiler
