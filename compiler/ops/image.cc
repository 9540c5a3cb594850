// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the image op family.
#include "compiler/ops/image.h"

#include <cmath>
#include <initializer_list>

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

// The output type of a resize of input 0 by the scales in input `scales` or the sizes in input
// `sizes` (-1: none); `roi` (-1: none) narrows the scaled extent for tf_crop_and_resize.
InferResult resize_type(const InferContext& ctx, int scales, int sizes, int roi) {
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
  if (values == nullptr) return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
  if (values->numel() != rank) {
    return ctx.errorf("expected {} {} (one per dim of input 0 {}), got {}", rank,
                      which == scales ? "scales" : "sizes", x.to_string(), values->numel());
  }
  if (which == sizes) {
    const std::vector<int64_t> s = tensor_to_ints(*values);
    for (int d = 0; d < rank; ++d) {
      if (s[static_cast<size_t>(d)] < 0) return ctx.errorf("expected sizes >= 0, got {}", s[d]);
      out[static_cast<size_t>(d)] = Dim(s[static_cast<size_t>(d)]);
    }
    return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
  }
  const std::vector<double> s = tensor_to_doubles(*values);
  std::vector<double> extent(static_cast<size_t>(rank), 1.0);
  if (roi >= 0) {
    const Tensor* r = ctx.input_value(roi);
    if (r == nullptr) return std::vector<ValueType>{TensorType(x.dtype, std::move(out))};
    const std::vector<double> rv = tensor_to_doubles(*r);
    for (int d = 0; d < rank; ++d) {
      extent[static_cast<size_t>(d)] =
          rv[static_cast<size_t>(d + rank)] - rv[static_cast<size_t>(d)];
    }
  }
  for (int d = 0; d < rank; ++d) {
    const double scale = s[static_cast<size_t>(d)];
    if (!(scale > 0) || !std::isfinite(scale)) {
      return ctx.errorf("expected positive scales, got {} for dim {}", scale, d);
    }
    const Dim& in = (*x.dims)[static_cast<size_t>(d)];
    if (!in.known()) continue;
    const double size = static_cast<double>(in.value) * extent[static_cast<size_t>(d)] * scale;
    if (!(size >= 0) || size > 9.0e15) {
      return ctx.errorf("scale {} gives an invalid size for dim {} of {}", scale, d, x.to_string());
    }
    out[static_cast<size_t>(d)] = Dim(static_cast<int64_t>(std::floor(size)));
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
              {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn", "tf_crop_and_resize"})) {
    return ctx.errorf("unknown coordinate_transformation_mode \"{}\"",
                      op.coordinate_transformation_mode);
  }
  if (!one_of(op.nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})) {
    return ctx.errorf("unknown nearest_mode \"{}\"", op.nearest_mode);
  }
  const bool crop = op.coordinate_transformation_mode == "tf_crop_and_resize";
  if (crop) {
    if (given(ctx, 1) == 0) return ctx.error("tf_crop_and_resize needs the roi input");
    KILN_RETURN_IF_ERROR(require_float(ctx, 1, "roi"));
    const TensorType& x = ctx.input(0);
    const Tensor* roi = ctx.input_value(1);
    if (x.has_rank() && roi != nullptr && roi->numel() != 2 * x.rank()) {
      return ctx.errorf("expected {} roi values (starts and ends), got {}", 2 * x.rank(),
                        roi->numel());
    }
  }
  return resize_type(ctx, 2, 3, crop ? 1 : -1);
}

template <>
InferResult infer_op(const ops::Upsample& op, const InferContext& ctx) {
  if (!one_of(op.mode, {"nearest", "linear"})) {
    return ctx.errorf("expected mode nearest or linear, got \"{}\"", op.mode);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  return resize_type(ctx, 1, -1, -1);
}

template <>
InferResult infer_op(const ops::GridSample& op, const InferContext& ctx) {
  if (!one_of(op.mode, {"bilinear", "nearest", "bicubic"})) {
    return ctx.errorf("expected mode bilinear, nearest or bicubic, got \"{}\"", op.mode);
  }
  if (!one_of(op.padding_mode, {"zeros", "border", "reflection"})) {
    return ctx.errorf("expected padding_mode zeros, border or reflection, got \"{}\"",
                      op.padding_mode);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 4));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 4));
  KILN_RETURN_IF_ERROR(require_float(ctx, 1, "grid"));
  const TensorType& x = ctx.input(0);
  const TensorType& grid = ctx.input(1);
  if (x.dtype == DType::kString || x.dtype == DType::kBool) {
    return ctx.errorf("input 0 must be numeric, got {}", x.to_string());
  }
  std::vector<Dim> xd = x.has_rank() ? *x.dims : std::vector<Dim>(4);
  std::vector<Dim> gd = grid.has_rank() ? *grid.dims : std::vector<Dim>(4);
  if (gd[3].known() && gd[3].value != 2) {
    return ctx.errorf("expected grid [N, H_out, W_out, 2], got {}", grid.to_string());
  }
  if (xd[0].known() && gd[0].known() && xd[0] != gd[0]) {
    return ctx.errorf("the batch sizes of X {} and grid {} differ", x.to_string(),
                      grid.to_string());
  }
  const Dim batch = xd[0].known() ? xd[0] : gd[0];
  return std::vector<ValueType>{TensorType(x.dtype, {batch, xd[1], gd[1], gd[2]})};
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
