// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the control op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/control.h"

#include <onnx/onnx_pb.h>

#include "compiler/onnx/node_importer.h"
#include "compiler/onnx/tensor_proto.h"

namespace kiln::compiler {

namespace {

constexpr std::string_view kOptionalType[] = {"type"};
constexpr std::string_view kScanDirections[] = {"directions"};

// Fills the tensor part of Optional's `type` from a TensorTypeProto.
Status fill_tensor_type(NodeImporter& ni, const onnx::TypeProto::Tensor& tt, ops::Optional& op) {
  std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    return ni.errorf("attribute \"type\": element type {} is not supported", tt.elem_type());
  }
  op.type_dtype = *dtype;
  if (tt.has_shape()) {
    std::vector<int64_t> dims;
    for (const auto& d : tt.shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    op.type_dims = std::move(dims);
  }
  return Status();
}

// Optional's `type` attribute is a TypeProto, which kiln's op holds as three plain fields.
Status import_optional(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kOptional, kOptionalType));
  ops::Optional op = generic.as<ops::Optional>();
  if (const onnx::AttributeProto* a = ni.attr("type")) {
    if (a->type() != onnx::AttributeProto::TYPE_PROTO) {
      return ni.error("attribute \"type\" must be a type");
    }
    const onnx::TypeProto& tp = a->tp();
    if (tp.has_tensor_type()) {
      KILN_RETURN_IF_ERROR(fill_tensor_type(ni, tp.tensor_type(), op));
    } else if (tp.has_sequence_type() && tp.sequence_type().elem_type().has_tensor_type()) {
      op.type_is_sequence = 1;
      KILN_RETURN_IF_ERROR(fill_tensor_type(ni, tp.sequence_type().elem_type().tensor_type(), op));
    } else {
      return ni.error("attribute \"type\" must be a tensor or a sequence of tensors");
    }
  }
  return ni.emit(op, ni.inputs()).status();
}

// The type of input i (a placeholder when absent: inference reports the missing input).
ValueType input_type(const NodeImporter& ni, int i) {
  return ni.has_input(i) ? ni.input(i)->type() : ValueType();
}

// `t` with the given dims (ascending) removed: what a body sees of a scanned or batched input.
ValueType without_dims(const ValueType& t, std::initializer_list<int64_t> axes) {
  if (!t.is_tensor() || !t.tensor().has_rank()) return t;
  std::vector<Dim> dims = *t.tensor().dims;
  for (auto it = std::rbegin(axes); it != std::rend(axes); ++it) {
    if (*it < 0 || *it >= static_cast<int64_t>(dims.size())) {
      return TensorType::unranked(t.tensor().dtype);
    }
    dims.erase(dims.begin() + *it);
  }
  return TensorType(t.tensor().dtype, std::move(dims));
}

ValueType scalar(DType dtype) {
  return TensorType(dtype, std::vector<Dim>{});
}

// Every importer of an op with a body types the body's inputs from the node's inputs, for the
// bodies that leave them untyped.
Status import_loop(NodeImporter& ni) {
  std::vector<ValueType> body{scalar(DType::kI64), scalar(DType::kBool)};
  for (int i = 2; i < ni.num_inputs(); ++i) body.push_back(input_type(ni, i));
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kLoop, {}, {{"body", body}}));
  return ni.emit(std::move(op), ni.inputs()).status();
}

Status import_scan(NodeImporter& ni) {
  const int64_t m = ni.int_attr("num_scan_inputs").value_or(0);
  const std::vector<int64_t> axes =
      ni.ints_attr("scan_input_axes").value_or(std::vector<int64_t>{});
  std::vector<ValueType> body;
  for (int i = 0; i < ni.num_inputs(); ++i) {
    const int j = i - (ni.num_inputs() - static_cast<int>(m));  // the scan input's index
    if (j < 0) {
      body.push_back(input_type(ni, i));
      continue;
    }
    int64_t axis = j < static_cast<int>(axes.size()) ? axes[static_cast<size_t>(j)] : 0;
    const ValueType t = input_type(ni, i);
    if (axis < 0 && t.is_tensor()) axis += t.tensor().rank();
    body.push_back(without_dims(t, {axis}));
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kScan, {}, {{"body", body}}));
  return ni.emit(std::move(op), ni.inputs()).status();
}

Status import_sequence_map(NodeImporter& ni) {
  std::vector<ValueType> body;
  for (int i = 0; i < ni.num_inputs(); ++i) {
    const ValueType t = input_type(ni, i);
    body.push_back(t.kind() == ValueType::Kind::kSequence ? t.element() : t);
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kSequenceMap, {}, {{"body", body}}));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// Opset 8's Scan: a leading batch axis, sequence_lens as input 0, and `directions` for what
// later became scan_input_directions.
Status import_scan_v8(NodeImporter& ni) {
  const int64_t m = ni.int_attr("num_scan_inputs").value_or(0);
  std::vector<ValueType> body;
  for (int i = 1; i < ni.num_inputs(); ++i) {
    const bool scanned = i >= ni.num_inputs() - static_cast<int>(m);
    body.push_back(scanned ? without_dims(input_type(ni, i), {0, 1})
                           : without_dims(input_type(ni, i), {0}));
  }
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kScan, kScanDirections, {{"body", body}}));
  ops::Scan op = generic.as<ops::Scan>();
  op.opset8_batched = 1;
  op.scan_input_directions = ni.ints_attr("directions");
  std::vector<Value*> inputs = ni.inputs();
  if (inputs.empty()) inputs.push_back(nullptr);
  return ni.emit(op, inputs).status();
}

}  // namespace

std::vector<OpsetImporter> control_importers() {
  return {
      {"", "Optional", 15, kLatestOpset, import_optional},
      {"", "Loop", 1, kLatestOpset, import_loop},
      {"", "Scan", 8, 8, import_scan_v8},
      {"", "Scan", 9, kLatestOpset, import_scan},
      {"", "SequenceMap", 17, kLatestOpset, import_sequence_map},
  };
}

}  // namespace kiln::compiler
