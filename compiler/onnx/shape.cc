// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the shape op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/shape.h"

#include <array>

#include "compiler/onnx/node_importer.h"
#include "compiler/ops/shape_util.h"

namespace kiln::compiler {

namespace {

using Names = std::array<std::string_view, 3>;

Value* ints_constant(NodeImporter& ni, const std::vector<int64_t>& values) {
  return ni.constant(Tensor::from_vector(values));
}

// A scalar of `dtype` holding `value` (Pad's old float `value` attribute).
Tensor scalar_of(DType dtype, double value) {
  Tensor t(dtype, Shape{});
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) *t.data<T>() = static_cast<T>(value);
  });
  return t;
}

// An unimplemented-feature error naming the node.
Status unsupported(const NodeImporter& ni, std::string_view message) {
  return unimplemented_error(std::string(ni.error(message).message()));
}

// Every value_* attribute is folded into `value`, so the graph sees one constant tensor.
Status import_constant(NodeImporter& ni) {
  if (ni.has_attr("sparse_value")) {
    return unsupported(ni, "the sparse_value attribute (sparse tensors) is not supported");
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kConstant));
  Result<Tensor> value = constant_tensor(op.as<ops::Constant>());
  if (!value.ok()) return ni.error(value.status().message());
  ops::Constant c;
  c.value = std::move(value).value();
  return ni.emit(Op(std::move(c)), {}).status();
}

// Reshape 1-4: the target shape is the `shape` attribute.
Status import_reshape_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kReshape, Names{"shape", "consumed_inputs", ""}));
  std::optional<std::vector<int64_t>> shape = ni.ints_attr("shape");
  if (!shape) return ni.error("expected the shape attribute");
  return ni.emit(std::move(op), {ni.input(0), ints_constant(ni, *shape)}).status();
}

// Squeeze/Unsqueeze 1-12: `axes` is an attribute.
Status import_axes_attr(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind, Names{"axes", "", ""}));
  std::vector<Value*> inputs = {ni.input(0)};
  std::optional<std::vector<int64_t>> axes = ni.ints_attr("axes");
  if (axes) {
    inputs.push_back(ints_constant(ni, *axes));
  } else if (kind == OpKind::kUnsqueeze) {
    return ni.error("expected the axes attribute");
  }
  return ni.emit(std::move(op), std::move(inputs)).status();
}

// Concat 1-3: axis defaults to 1.
Status import_concat_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kConcat));
  ops::Concat c = op.as<ops::Concat>();
  if (!c.axis) c.axis = 1;
  return ni.emit(Op(std::move(c)), ni.inputs()).status();
}

// Split 1-12: the sizes are the `split` attribute (opset 1 also allowed them as input 1).
Status import_split_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kSplit, Names{"split", "", ""}));
  std::vector<Value*> inputs = {ni.input(0)};
  if (ni.has_input(1)) {
    inputs.push_back(ni.input(1));
  } else if (std::optional<std::vector<int64_t>> split = ni.ints_attr("split")) {
    inputs.push_back(ints_constant(ni, *split));
  }
  return ni.emit(std::move(op), std::move(inputs)).status();
}

// Slice 1-9: starts, ends and axes are attributes; there are no steps.
Status import_slice_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kSlice, Names{"starts", "ends", "axes"}));
  std::optional<std::vector<int64_t>> starts = ni.ints_attr("starts"), ends = ni.ints_attr("ends");
  if (!starts || !ends) return ni.error("expected the starts and ends attributes");
  std::vector<Value*> inputs = {ni.input(0), ints_constant(ni, *starts), ints_constant(ni, *ends)};
  if (std::optional<std::vector<int64_t>> axes = ni.ints_attr("axes")) {
    inputs.push_back(ints_constant(ni, *axes));
  }
  return ni.emit(std::move(op), std::move(inputs)).status();
}

// Tile 1-5: inputs (input, tiles, axis) repeat one axis; both must be constants.
Status import_tile_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kTile));
  if (!ni.has_input(2)) return ni.error("expected inputs (input, tiles, axis)");
  const Tensor* tiles = ni.input(1)->constant_value();
  const Tensor* axis = ni.input(2)->constant_value();
  const TensorType& in = ni.input(0)->tensor_type();
  if (tiles == nullptr || axis == nullptr || !in.has_rank() || tiles->numel() != 1 ||
      axis->numel() != 1 || !dtype_is_integer(tiles->dtype()) || !dtype_is_integer(axis->dtype())) {
    return unsupported(ni,
                       "Tile-1 is supported only with constant one-element tiles and axis, "
                       "and an input of known rank");
  }
  std::vector<int64_t> repeats(static_cast<size_t>(in.rank()), 1);
  int64_t a = 0, t = 0;
  visit_dtype(axis->dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) a = static_cast<int64_t>(axis->data<T>()[0]);
  });
  visit_dtype(tiles->dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) t = static_cast<int64_t>(tiles->data<T>()[0]);
  });
  if (a < 0) a += in.rank();
  if (a < 0 || a >= in.rank())
    return ni.errorf("axis {} is out of range for {}", a, in.to_string());
  repeats[static_cast<size_t>(a)] = t;
  return ni.emit(std::move(op), {ni.input(0), ints_constant(ni, repeats)}).status();
}

// Pad 1-10: pads (`paddings` in opset 1) and the float `value` are attributes.
Status import_pad_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kPad, Names{"pads", "paddings", "value"}));
  std::optional<std::vector<int64_t>> pads = ni.ints_attr(ni.opset() == 1 ? "paddings" : "pads");
  if (!pads) return ni.errorf("expected the {} attribute", ni.opset() == 1 ? "paddings" : "pads");
  const DType dtype = ni.input(0)->tensor_type().dtype;
  if (dtype == DType::kString) return ni.error("expected a numeric input, got a string tensor");
  std::vector<Value*> inputs = {ni.input(0), ints_constant(ni, *pads)};
  inputs.push_back(ni.constant(scalar_of(dtype, ni.float_attr("value").value_or(0.0f))));
  return ni.emit(std::move(op), std::move(inputs)).status();
}

}  // namespace

std::vector<OpsetImporter> shape_importers() {
  return {
      {"", "Constant", 1, kLatestOpset, import_constant},
      {"", "Reshape", 1, 4, import_reshape_v1},
      {"", "Squeeze", 1, 12,
       [](NodeImporter& ni) { return import_axes_attr(ni, OpKind::kSqueeze); }},
      {"", "Unsqueeze", 1, 12,
       [](NodeImporter& ni) { return import_axes_attr(ni, OpKind::kUnsqueeze); }},
      {"", "Concat", 1, 3, import_concat_v1},
      {"", "Split", 1, 12, import_split_v1},
      {"", "Slice", 1, 9, import_slice_v1},
      {"", "Tile", 1, 5, import_tile_v1},
      {"", "Pad", 1, 10, import_pad_v1},
  };
}

}  // namespace kiln::compiler
