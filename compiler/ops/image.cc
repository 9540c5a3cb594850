// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the image op family.
#include "compiler/ops/image.h"

#include <cmath>
#include <initializer_list>

#include "compiler/ops/image_util.h"
#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

bool one_of(std::string_view value, std::initializer_list<std::string_view> allowed) {
  for (std::string_view a : allowed) {
    if (value == a) return true;
  }
  return false;
}

Status require_float(const InferContext& ctx, int i, std::string_view name) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  if (!dtype_is_float(ctx.input(i).dtype)) {
    return ctx.errorf("input {} ({}) must be a floating-point tensor, got {}", i, name,
                      ctx.input(i).to_string());
  }
  return Status();
}

// Whether an optional Resize input holds values: 1 yes, 0 no (absent or empty), -1 unknown.
int given(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return 0;
  if (const Tensor* t = ctx.input_value(i)) return t->numel() > 0 ? 1 : 0;
  const TensorType& type = ctx.input(i);
  if (type.is_static()) return type.shape().numel() > 0 ? 1 : 0;
  return -1;
}

// The output type of a Resize (an Upsample is a Resize of every axis) of input 0 by the scales in
// input `scales` or the sizes in input `sizes` (-1: none); `roi` (-1: none) holds the region that
// tf_crop_and_resize scales.
InferResult resize_type(const ops::Resize& op, const InferContext& ctx, int scales, int sizes,
                        int roi) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (x.dtype == DType::kString) return ctx.error("string tensors cannot be resized");
  const int has_scales = scales >= 0 ? given(ctx, scales) : 0;
  const int has_sizes = sizes >= 0 ? given(ctx, sizes) : 0;
  if (has_scales == 1 && has_sizes == 1) {
    return ctx.error("expected scales or sizes, got both");
  }
  if (has_scales == 0 && has_sizes == 0) return ctx.error("expected scales or sizes, got neither");
  if (has_scales == 1) KILN_RETURN_IF_ERROR(require_float(ctx, scales, "scales"));
  if (has_sizes == 1 && ctx.input(sizes).dtype != DType::kI64) {
    return ctx.errorf("input {} (sizes) must be i64, got {}", sizes, ctx.input(sizes).to_string());
  }
  if (!x.has_rank()) return std::vector<ValueType>{TensorType::unranked(x.dtype)};
  const int rank = x.rank();
  if (rank == 0) return ctx.error("expected an input of rank >= 1, got a scalar");
  std::vector<Dim> out(static_cast<size_t>(rank));
  const int which = has_scales == 1 ? scales : has_sizes == 1 ? sizes : -1;
  const Tensor* values = which >= 0 ? ctx.input_value(which) : nullptr;
  std::vector<double> roi_values;
  if (roi >= 0) {
    const Tensor* r = ctx.input_value(roi);
    if (r == nullptr) values = nullptr;
    if (r != nullptr) roi_values = tensor_to_doubles(*r);
  }
  if (values == nullptr) {
    // Only the axes the op resizes are unknown.
    if (op.axes) {
      out = *x.dims;
      for (int64_t a : *op.axes) {
        if (a >= -rank && a < rank) out[static_cast<size_t>(a < 0 ? a + rank : a)] = Dim();
      }
    }
    return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
  }
  std::vector<int64_t> in;
  for (const Dim& d : *x.dims) in.push_back(d.known() ? d.value : -1);
  Result<ResizeGeometry> g = invalid_argument_error("");
  if (which == scales) {
    const std::vector<double> s = tensor_to_doubles(*values);
    g = resize_geometry(op, in, &s, nullptr, roi_values);
  } else {
    const std::vector<int64_t> s = tensor_to_ints(*values);
    g = resize_geometry(op, in, nullptr, &s, roi_values);
  }
  if (!g.ok()) return ctx.error(g.status().message());
  for (int d = 0; d < rank; ++d) {
    const int64_t size = g->sizes[static_cast<size_t>(d)];
    if (size >= 0) out[static_cast<size_t>(d)] = Dim(size);
  }
  return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
}

}  // namespace

template <>
InferResult infer_op(const ops::Resize& op, const InferContext& ctx) {
  if (!one_of(op.mode, {"nearest", "linear", "cubic"})) {
    return ctx.errorf("expected mode nearest, linear or cubic, got \"{}\"", op.mode);
  }
  if (!one_of(op.coordinate_transformation_mode,
              {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"})) {
    return ctx.errorf("unknown coordinate_transformation_mode \"{}\"",
                      op.coordinate_transformation_mode);
  }
  if (!one_of(op.keep_aspect_ratio_policy, {"stretch", "not_larger", "not_smaller"})) {
    return ctx.errorf("expected keep_aspect_ratio_policy stretch, not_larger or not_smaller, got \"{}\"",
                      op.keep_aspect_ratio_policy);
  }
  if (op.antialias != 0 && op.antialias != 1) {
    return ctx.errorf("expected antialias 0 or 1, got {}", op.antialias);
  }
  if (op.antialias != 0 && op.mode == "nearest") {
    return ctx.error("antialias applies to the linear and cubic modes, not nearest");
  }
  if (!one_of(op.nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})) {
    return ctx.errorf("unknown nearest_mode \"{}\"", op.nearest_mode);
  }
  const bool crop = op.coordinate_transformation_mode == "tf_crop_and_resize";
  if (crop) {
    if (given(ctx, 1) == 0) return ctx.error("tf_crop_and_resize needs the roi input");
    KILN_RETURN_IF_ERROR(require_float(ctx, 1, "roi"));
  }
  return resize_type(op, ctx, 2, 3, crop ? 1 : -1);
}

template <>
InferResult infer_op(const ops::Upsample& op, const InferContext& ctx) {
  if (!one_of(op.mode, {"nearest", "linear"})) {
    return ctx.errorf("expected mode nearest or linear, got \"{}\"", op.mode);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  return resize_type(ops::Resize{}, ctx, 1, -1, -1);
}

template <>
InferResult infer_op(const ops::GridSample& op, const InferContext& ctx) {
  // Opset 20 renamed bilinear and bicubic to linear and cubic, for any number of spatial dims.
  if (!one_of(op.mode, {"linear", "bilinear", "nearest", "cubic", "bicubic"})) {
    return ctx.errorf("expected mode linear, nearest or cubic, got \"{}\"", op.mode);
  }
  if (!one_of(op.padding_mode, {"zeros", "border", "reflection"})) {
    return ctx.errorf("expected padding_mode zeros, border or reflection, got \"{}\"",
                      op.padding_mode);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  KILN_RETURN_IF_ERROR(require_float(ctx, 1, "grid"));
  const TensorType& x = ctx.input(0);
  const TensorType& grid = ctx.input(1);
  if (x.dtype == DType::kString || x.dtype == DType::kBool) {
    return ctx.errorf("input 0 must be numeric, got {}", x.to_string());
  }
  if (!x.has_rank() && !grid.has_rank()) return std::vector<ValueType>{TensorType::unranked(x.dtype)};
  const int rank = x.has_rank() ? x.rank() : grid.rank();
  if (rank < 3) return ctx.errorf("expected X of rank >= 3 [N, C, spatial...], got {}", x.to_string());
  if ((x.has_rank() && x.rank() != rank) || (grid.has_rank() && grid.rank() != rank)) {
    return ctx.errorf("expected X [N, C, D1, ...] and grid [N, D1_out, ..., {}] of one rank, got {} and {}",
                      rank - 2, x.to_string(), grid.to_string());
  }
  std::vector<Dim> xd = x.has_rank() ? *x.dims : std::vector<Dim>(static_cast<size_t>(rank));
  std::vector<Dim> gd = grid.has_rank() ? *grid.dims : std::vector<Dim>(static_cast<size_t>(rank));
  if (gd.back().known() && gd.back().value != rank - 2) {
    return ctx.errorf("expected grid [N, D1_out, ..., {}] (one coordinate per spatial dim), got {}",
                      rank - 2, grid.to_string());
  }
  if (xd[0].known() && gd[0].known() && xd[0] != gd[0]) {
    return ctx.errorf("the batch sizes of X {} and grid {} differ", x.to_string(),
                      grid.to_string());
  }
  std::vector<Dim> out = {xd[0].known() ? xd[0] : gd[0], xd[1]};
  out.insert(out.end(), gd.begin() + 1, gd.end() - 1);
  return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
}

template <>
InferResult infer_op(const ops::RoiAlign& op, const InferContext& ctx) {
  if (!one_of(op.mode, {"avg", "max"})) {
    return ctx.errorf("expected mode avg or max, got \"{}\"", op.mode);
  }
  if (!one_of(op.coordinate_transformation_mode, {"half_pixel", "output_half_pixel"})) {
    return ctx.errorf(
        "expected coordinate_transformation_mode half_pixel or output_half_pixel, "
        "got \"{}\"",
        op.coordinate_transformation_mode);
  }
  if (op.output_height < 1 || op.output_width < 1 || op.sampling_ratio < 0) {
    return ctx.errorf(
        "expected output_height, output_width >= 1 and sampling_ratio >= 0, got "
        "{}, {} and {}",
        op.output_height, op.output_width, op.sampling_ratio);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 4));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 2));
  KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
  KILN_RETURN_IF_ERROR(require_float(ctx, 0, "X"));
  const TensorType& x = ctx.input(0);
  const TensorType& rois = ctx.input(1);
  const TensorType& indices = ctx.input(2);
  if (rois.dtype != x.dtype) {
    return ctx.errorf("rois {} must have the element type of X {}", rois.to_string(),
                      x.to_string());
  }
  if (indices.dtype != DType::kI64) {
    return ctx.errorf("batch_indices must be i64, got {}", indices.to_string());
  }
  std::vector<Dim> rd = rois.has_rank() ? *rois.dims : std::vector<Dim>(2);
  const Dim count = indices.has_rank() ? (*indices.dims)[0] : Dim();
  if (rd[1].known() && rd[1].value != 4) {
    return ctx.errorf("expected rois [num_rois, 4], got {}", rois.to_string());
  }
  if (rd[0].known() && count.known() && rd[0] != count) {
    return ctx.errorf("rois {} and batch_indices {} disagree on the number of rois",
                      rois.to_string(), indices.to_string());
  }
  const Dim channels = x.has_rank() ? (*x.dims)[1] : Dim();
  return std::vector<ValueType>{TensorType(
      x.dtype, {rd[0].known() ? rd[0] : count, channels, op.output_height, op.output_width})};
}

template <>
InferResult infer_op(const ops::NonMaxSuppression& op, const InferContext& ctx) {
  if (op.center_point_box != 0 && op.center_point_box != 1) {
    return ctx.errorf("expected center_point_box 0 or 1, got {}", op.center_point_box);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 3));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 3));
  const TensorType& boxes = ctx.input(0);
  const TensorType& scores = ctx.input(1);
  if (boxes.dtype != DType::kF32 || scores.dtype != DType::kF32) {
    return ctx.errorf("expected f32 boxes and scores, got {} and {}", boxes.to_string(),
                      scores.to_string());
  }
  if (boxes.has_rank() && scores.has_rank()) {
    const auto& bd = *boxes.dims;
    const auto& sd = *scores.dims;
    const bool ok = (!bd[2].known() || bd[2].value == 4) &&
                    (!bd[0].known() || !sd[0].known() || bd[0] == sd[0]) &&
                    (!bd[1].known() || !sd[2].known() || bd[1] == sd[2]);
    if (!ok) {
      return ctx.errorf(
          "expected boxes [batch, boxes, 4] and scores [batch, classes, boxes], got "
          "{} and {}",
          boxes.to_string(), scores.to_string());
    }
  }
  const std::initializer_list<std::pair<int, DType>> scalars = {
      {2, DType::kI64}, {3, DType::kF32}, {4, DType::kF32}};
  for (const auto& [i, dtype] : scalars) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(ctx.require_input(i));
    const TensorType& t = ctx.input(i);
    if (t.dtype != dtype || (t.is_static() && t.shape().numel() != 1)) {
      return ctx.errorf("input {} must be a single {} value, got {}", i, dtype_name(dtype),
                        t.to_string());
    }
  }
  return std::vector<ValueType>{TensorType(DType::kI64, {Dim(), Dim(3)})};
}

}  // namespace kiln::compiler
