// SPDX-License-Identifier: Apache-2.0
// Conversion between onnx::TensorProto and kiln tensors, and ONNX element-type codes.
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace onnx {
class TensorProto;
}

namespace kiln::compiler {

// The DType of an ONNX TensorProto::DataType code, or nullopt (complex, float8, undefined).
std::optional<DType> dtype_from_onnx(int32_t onnx_type);
int32_t dtype_to_onnx(DType dtype);

// Decodes a TensorProto (raw_data or typed fields; external data read from `external_dir`).
// `what` names the tensor in errors.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& external_dir,
                                 const std::string& what);
// Encodes a tensor (raw_data for numbers, string_data for strings).
void tensor_to_proto(const Tensor& tensor, onnx::TensorProto* proto);

}  // namespace kiln::compiler
