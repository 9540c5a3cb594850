// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the random op family.
#include "compiler/ops/random.h"

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

Status require_float_dtype(const InferContext& ctx, DType dtype, std::string_view what) {
  if (!dtype_is_float(dtype))
    return ctx.errorf("{} must be a float type, got {}", what, dtype_name(dtype));
  return Status();
}

InferResult infer_random(const InferContext& ctx, DType dtype,
                         const std::optional<std::vector<int64_t>>& shape) {
  KILN_RETURN_IF_ERROR(require_float_dtype(ctx, dtype, "dtype"));
  if (!shape) return ctx.error("the shape attribute is required");
  std::vector<Dim> dims;
  for (int64_t d : *shape) {
    if (d < 0) return ctx.errorf("shape dims must be >= 0, got {}", d);
    dims.emplace_back(d);
  }
  return std::vector<ValueType>{TensorType(dtype, std::move(dims))};
}

InferResult infer_random_like(const InferContext& ctx, const std::optional<DType>& dtype) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  TensorType out = ctx.input(0);
  out.dtype = dtype.value_or(out.dtype);
  KILN_RETURN_IF_ERROR(require_float_dtype(ctx, out.dtype, "the output dtype"));
  return std::vector<ValueType>{out};
}

}  // namespace

template <>
InferResult infer_op(const ops::Bernoulli& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  TensorType out = ctx.input(0);
  KILN_RETURN_IF_ERROR(require_float_dtype(ctx, out.dtype, "the input"));
  out.dtype = op.dtype.value_or(out.dtype);
  if (out.dtype == DType::kString) return ctx.error("dtype must be numeric or bool, got string");
  return std::vector<ValueType>{out};
}

template <>
InferResult infer_op(const ops::RandomUniform& op, const InferContext& ctx) {
  if (!(op.low <= op.high)) return ctx.errorf("low {} must not exceed high {}", op.low, op.high);
  return infer_random(ctx, op.dtype, op.shape);
}

template <>
InferResult infer_op(const ops::RandomUniformLike& op, const InferContext& ctx) {
  if (!(op.low <= op.high)) return ctx.errorf("low {} must not exceed high {}", op.low, op.high);
  return infer_random_like(ctx, op.dtype);
}

template <>
InferResult infer_op(const ops::RandomNormal& op, const InferContext& ctx) {
  return infer_random(ctx, op.dtype, op.shape);
}

template <>
InferResult infer_op(const ops::RandomNormalLike& op, const InferContext& ctx) {
  return infer_random_like(ctx, op.dtype);
}

template <>
InferResult infer_op(const ops::Multinomial& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 2));
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(require_float_dtype(ctx, x.dtype, "the input"));
  if (op.dtype != DType::kI32 && op.dtype != DType::kI64) {
    return ctx.errorf("dtype must be i32 or i64, got {}", dtype_name(op.dtype));
  }
  if (op.sample_size < 1) return ctx.errorf("sample_size must be >= 1, got {}", op.sample_size);
  Dim batch = x.has_rank() ? (*x.dims)[0] : Dim();
  if (x.has_rank() && (*x.dims)[1].known() && (*x.dims)[1].value < 1) {
    return ctx.errorf("expected at least one class, got {}", x.to_string());
  }
  return std::vector<ValueType>{TensorType(op.dtype, {batch, Dim(op.sample_size)})};
}

}  // namespace kiln::compiler
