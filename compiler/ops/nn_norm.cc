// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the nn family's normalizations, Dropout and the softmax ops.
#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/nn.h"
#include "compiler/ops/nn_util.h"

namespace kiln::compiler {

namespace {

Status check_arity(const InferContext& ctx, int min, int max) {
  if (ctx.num_inputs() < min || ctx.num_inputs() > max) {
    if (min == max) return ctx.errorf("expected {} input(s), got {}", min, ctx.num_inputs());
    return ctx.errorf("expected {} to {} inputs, got {}", min, max, ctx.num_inputs());
  }
  return Status();
}

Status check_float_input(const InferContext& ctx, int i) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  DType d = ctx.input(i).dtype;
  if (!dtype_is_float(d)) {
    return ctx.errorf("input {} must be a float type (f16, bf16, f32, f64), got {}", i,
                      dtype_name(d));
  }
  return Status();
}

Status check_min_rank(const InferContext& ctx, int i, int min_rank) {
  const TensorType& t = ctx.input(i);
  if (t.has_rank() && t.rank() < min_rank) {
    return ctx.errorf("input {} must have rank >= {}, got {}", i, min_rank, t.to_string());
  }
  return Status();
}

// Input i is a float 1-D tensor of `size` values (checked where known).
Status check_channel_param(const InferContext& ctx, int i, const Dim& size) {
  KILN_RETURN_IF_ERROR(check_float_input(ctx, i));
  KILN_RETURN_IF_ERROR(ctx.require_input(i, 1));
  const TensorType& t = ctx.input(i);
  if (t.has_rank() && size.known() && (*t.dims)[0].known() && (*t.dims)[0].value != size.value) {
    return ctx.errorf("input {} must have {} values (one per channel), got {}", i, size.value,
                      t.to_string());
  }
  return Status();
}

Dim channels_of(const TensorType& x) {
  return x.has_rank() ? (*x.dims)[1] : Dim();
}

Status check_axis(const InferContext& ctx, int64_t axis, const TensorType& x) {
  if (x.has_rank() && (axis < -x.rank() || axis >= std::max(x.rank(), 1))) {
    return ctx.errorf("axis {} is out of range for input {}", axis, x.to_string());
  }
  return Status();
}

// Softmax, LogSoftmax, Hardmax: one float input and an axis; the output has the input's type.
InferResult softmax_types(const InferContext& ctx, int64_t axis) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_axis(ctx, axis, ctx.input(0)));
  return std::vector<ValueType>{ctx.input(0)};
}

// Whether `from` broadcasts to `to` numpy-style, one-directionally (checked where known).
bool broadcasts_to(const std::vector<Dim>& from, const std::vector<Dim>& to) {
  if (from.size() > to.size()) return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    const Dim& f = from[i];
    const Dim& t = to[i + offset];
    if (f.known() && t.known() && f.value != 1 && f.value != t.value) return false;
  }
  return true;
}

}  // namespace

template <>
InferResult infer_op(const ops::BatchNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 5, 5));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_min_rank(ctx, 0, 2));
  if (op.training_mode != 0 && op.training_mode != 1) {
    return ctx.errorf("expected training_mode 0 or 1, got {}", op.training_mode);
  }
  const TensorType& x = ctx.input(0);
  Dim c = channels_of(x);
  for (int i = 1; i < 5; ++i) KILN_RETURN_IF_ERROR(check_channel_param(ctx, i, c));
  if (ctx.input(1).dtype != ctx.input(2).dtype || ctx.input(3).dtype != ctx.input(4).dtype) {
    return ctx.errorf(
        "scale and B, and mean and var, must have one element type each, got {}, "
        "{}, {}, {}",
        dtype_name(ctx.input(1).dtype), dtype_name(ctx.input(2).dtype),
        dtype_name(ctx.input(3).dtype), dtype_name(ctx.input(4).dtype));
  }
  TensorType stats(ctx.input(3).dtype, std::vector<Dim>{c});
  return std::vector<ValueType>{x, stats, stats};
}

template <>
InferResult infer_op(const ops::InstanceNormalization& /*op*/, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_min_rank(ctx, 0, 3));
  const TensorType& x = ctx.input(0);
  for (int i = 1; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(check_channel_param(ctx, i, channels_of(x)));
    if (ctx.input(i).dtype != x.dtype) {
      return ctx.errorf("input {} must have the input's element type {}, got {}", i,
                        dtype_name(x.dtype), dtype_name(ctx.input(i).dtype));
    }
  }
  return std::vector<ValueType>{x};
}

template <>
InferResult infer_op(const ops::LayerNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_min_rank(ctx, 0, 1));
  if (!dtype_is_float(op.stash_type)) {
    return ctx.errorf("expected a float stash_type, got {}", dtype_name(op.stash_type));
  }
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(check_axis(ctx, op.axis, x));
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(ctx.require_input(i));
    const TensorType& p = ctx.input(i);
    if (p.dtype != x.dtype) {
      return ctx.errorf("input {} must have the input's element type {}, got {}", i,
                        dtype_name(x.dtype), dtype_name(p.dtype));
    }
    if (x.has_rank() && p.has_rank()) {
      const int axis = static_cast<int>(op.axis < 0 ? op.axis + x.rank() : op.axis);
      std::vector<Dim> normalized(x.dims->begin() + axis, x.dims->end());
      if (!broadcasts_to(*p.dims, normalized)) {
        return ctx.errorf("input {} {} does not broadcast to the normalized dims of {}", i,
                          p.to_string(), x.to_string());
      }
    }
  }
  if (!x.has_rank()) {
    return std::vector<ValueType>{x, TensorType::unranked(op.stash_type),
                                  TensorType::unranked(op.stash_type)};
  }
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + x.rank() : op.axis);
  std::vector<Dim> stats = *x.dims;
  for (auto i = static_cast<size_t>(axis); i < stats.size(); ++i) stats[i] = Dim(1);
  TensorType s(op.stash_type, std::move(stats));
  return std::vector<ValueType>{x, s, s};
}

template <>
InferResult infer_op(const ops::GroupNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_min_rank(ctx, 0, 2));
  if (!op.num_groups) return ctx.error("the num_groups attribute is required");
  if (*op.num_groups < 1) return ctx.errorf("expected num_groups >= 1, got {}", *op.num_groups);
  if (!dtype_is_float(op.stash_type)) {
    return ctx.errorf("expected a float stash_type, got {}", dtype_name(op.stash_type));
  }
  const TensorType& x = ctx.input(0);
  const Dim c = channels_of(x);
  if (c.known() && c.value % *op.num_groups != 0) {
    return ctx.errorf("the {} channels of {} do not split into {} groups", c.value, x.to_string(),
                      *op.num_groups);
  }
  for (int i = 1; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(check_channel_param(ctx, i, c));
    if (ctx.input(i).dtype != x.dtype) {
      return ctx.errorf("input {} must have the input's element type {}, got {}", i,
                        dtype_name(x.dtype), dtype_name(ctx.input(i).dtype));
    }
  }
  return std::vector<ValueType>{x};
}

template <>
InferResult infer_op(const ops::LRN& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_min_rank(ctx, 0, 2));
  if (!op.size) return ctx.error("the size attribute is required");
  if (*op.size < 1) return ctx.errorf("expected size >= 1, got {}", *op.size);
  return std::vector<ValueType>{ctx.input(0)};
}

template <>
InferResult infer_op(const ops::MeanVarianceNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  const TensorType& x = ctx.input(0);
  if (x.has_rank()) {
    std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
    for (int64_t a : op.axes) {
      if (a < -x.rank() || a >= x.rank()) {
        return ctx.errorf("axes {} are out of range for input {}", ints_string(op.axes),
                          x.to_string());
      }
      auto i = static_cast<size_t>(a < 0 ? a + x.rank() : a);
      if (seen[i]) return ctx.errorf("axes {} repeat an axis", ints_string(op.axes));
      seen[i] = true;
    }
  }
  return std::vector<ValueType>{x};
}

template <>
InferResult infer_op(const ops::LpNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  if (op.p != 1 && op.p != 2) return ctx.errorf("expected p 1 or 2, got {}", op.p);
  KILN_RETURN_IF_ERROR(check_axis(ctx, op.axis, ctx.input(0)));
  return std::vector<ValueType>{ctx.input(0)};
}

template <>
InferResult infer_op(const ops::Dropout& /*op*/, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(check_float_input(ctx, 1));
    KILN_RETURN_IF_ERROR(ctx.require_input(1, 0));
    if (const Tensor* r = ctx.input_value(1)) {
      double ratio = tensor_to_doubles(*r)[0];
      if (!(ratio >= 0 && ratio < 1))
        return ctx.errorf("expected a ratio in [0, 1), got {}", ratio);
    }
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 0));
    if (ctx.input(2).dtype != DType::kBool) {
      return ctx.errorf("training_mode (input 2) must be bool, got {}",
                        dtype_name(ctx.input(2).dtype));
    }
  }
  TensorType mask = ctx.input(0);
  mask.dtype = DType::kBool;
  return std::vector<ValueType>{ctx.input(0), mask};
}

template <>
InferResult infer_op(const ops::Softmax& op, const InferContext& ctx) {
  return softmax_types(ctx, op.axis);
}

template <>
InferResult infer_op(const ops::LogSoftmax& op, const InferContext& ctx) {
  return softmax_types(ctx, op.axis);
}

template <>
InferResult infer_op(const ops::Hardmax& op, const InferContext& ctx) {
  return softmax_types(ctx, op.axis);
}

}  // namespace kiln::compiler
