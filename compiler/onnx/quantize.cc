// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the quantize op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/quantize.h"

#include <optional>
#include <string_view>

#include "compiler/onnx/node_importer.h"
#include "compiler/onnx/tensor_proto.h"

namespace kiln::compiler {

namespace {

// An element-type attribute whose default, 0 (UNDEFINED), means "not given".
Result<std::optional<DType>> optional_dtype_attr(NodeImporter& ni, std::string_view name) {
  if (!ni.has_attr(name)) return std::optional<DType>();
  std::optional<int64_t> code = ni.int_attr(name);
  if (!code) return ni.errorf("attribute \"{}\" must be an element type (an int)", name);
  if (*code == 0) return std::optional<DType>();
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(*code));
  if (!dtype) return ni.errorf("attribute \"{}\": element type {} is not supported", name, *code);
  return dtype;
}

// QuantizeLinear and DequantizeLinear: `output_dtype` and `precision` are element types where 0
// means absent.
Status import_quantize_linear(NodeImporter& ni) {
  static constexpr std::string_view kDtypeAttrs[] = {"output_dtype", "precision"};
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kQuantizeLinear, kDtypeAttrs));
  ops::QuantizeLinear op = generic.as<ops::QuantizeLinear>();
  KILN_ASSIGN_OR_RETURN(op.output_dtype, optional_dtype_attr(ni, "output_dtype"));
  KILN_ASSIGN_OR_RETURN(op.precision, optional_dtype_attr(ni, "precision"));
  return ni.emit(op, ni.inputs()).status();
}

Status import_dequantize_linear(NodeImporter& ni) {
  static constexpr std::string_view kDtypeAttrs[] = {"output_dtype"};
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kDequantizeLinear, kDtypeAttrs));
  ops::DequantizeLinear op = generic.as<ops::DequantizeLinear>();
  KILN_ASSIGN_OR_RETURN(op.output_dtype, optional_dtype_attr(ni, "output_dtype"));
  return ni.emit(op, ni.inputs()).status();
}

}  // namespace

std::vector<OpsetImporter> quantize_importers() {
  return {
      {"", "QuantizeLinear", 10, 28, import_quantize_linear},
      {"", "DequantizeLinear", 10, 28, import_dequantize_linear},
  };
}

}  // namespace kiln::compiler
