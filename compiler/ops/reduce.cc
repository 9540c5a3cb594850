// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the reduce op family.
#include "compiler/ops/reduce.h"

#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

bool is_numeric(DType dt) {
  return dt != DType::kString && dt != DType::kBool;
}

Status require_numeric(const InferContext& ctx, int i) {
  DType dt = ctx.input(i).dtype;
  if (!is_numeric(dt)) return ctx.errorf("expected a numeric input {}, got {}", i, dtype_name(dt));
  return Status();
}

// The Reduce* inference shared by every op of the group (they have the same fields). ReduceMax and
// ReduceMin take bools too (opset 20).
template <class R>
InferResult infer_reduce(const R& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  constexpr bool kBools = std::is_same_v<R, ops::ReduceMax> || std::is_same_v<R, ops::ReduceMin>;
  if (!kBools || ctx.input(0).dtype != DType::kBool) KILN_RETURN_IF_ERROR(require_numeric(ctx, 0));
  const TensorType& in = ctx.input(0);
  std::optional<std::vector<int64_t>> axes = op.axes;
  bool axes_known = true;
  if (ctx.has_input(1)) {
    if (op.axes) return ctx.error("expected axes as an attribute or as an input, got both");
    KILN_RETURN_IF_ERROR(ctx.require_input(1));
    const TensorType& at = ctx.input(1);
    if (at.dtype != DType::kI64) {
      return ctx.errorf("expected i64 axes, got {}", dtype_name(at.dtype));
    }
    if (at.has_rank() && at.rank() != 1)
      return ctx.errorf("expected 1-D axes, got {}", at.to_string());
    axes = known_ints(ctx, 1);
    axes_known = axes.has_value();
  }
  if (!in.has_rank()) return std::vector<ValueType>{TensorType::unranked(in.dtype)};
  const int rank = in.rank();
  if (!axes_known) {
    if (op.keepdims != 0) return std::vector<ValueType>{unknown_dims(in.dtype, rank)};
    // Distinct axes: the output loses as many dims as there are axes.
    const TensorType& at = ctx.input(1);
    if (!at.is_static()) return std::vector<ValueType>{TensorType::unranked(in.dtype)};
    const int64_t n = at.shape()[0];
    if (n > rank) return ctx.errorf("expected at most {} axes, got {}", rank, n);
    if (n == 0) {
      return std::vector<ValueType>{op.noop_with_empty_axes != 0 ? in
                                                                 : TensorType(in.dtype, Shape{})};
    }
    return std::vector<ValueType>{unknown_dims(in.dtype, rank - static_cast<int>(n))};
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (op.noop_with_empty_axes != 0) return std::vector<ValueType>{in};
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t a : *axes) {
      if (a < -rank || a >= rank) {
        return ctx.errorf("expected axes in [{}, {}), got {}", -rank, rank, a);
      }
      auto d = static_cast<size_t>(a < 0 ? a + rank : a);
      if (reduced[d]) return ctx.errorf("expected distinct axes, got axis {} twice", d);
      reduced[d] = true;
    }
  }
  std::vector<Dim> dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      dims.push_back((*in.dims)[static_cast<size_t>(d)]);
    } else if (op.keepdims != 0) {
      dims.emplace_back(1);
    }
  }
  return std::vector<ValueType>{TensorType(in.dtype, std::move(dims))};
}

template <class A>
InferResult infer_arg_reduce(const A& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_numeric(ctx, 0));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return std::vector<ValueType>{TensorType::unranked(DType::kI64)};
  const int rank = in.rank();
  if (op.axis < -rank || op.axis >= rank || rank == 0) {
    return ctx.errorf("expected axis in [{}, {}), got {}", -rank, rank, op.axis);
  }
  const auto axis = static_cast<size_t>(op.axis < 0 ? op.axis + rank : op.axis);
  if ((*in.dims)[axis].value == 0)
    return ctx.errorf("expected a non-empty axis {}, got size 0", axis);
  std::vector<Dim> dims = *in.dims;
  if (op.keepdims != 0) {
    dims[axis] = Dim(1);
  } else {
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  }
  return std::vector<ValueType>{TensorType(DType::kI64, std::move(dims))};
}

// CumSum and CumProd: the input, and one axis (a scalar or one-element i32/i64 tensor).
InferResult infer_cumulative(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_numeric(ctx, 0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& in = ctx.input(0);
  const TensorType& at = ctx.input(1);
  if (at.dtype != DType::kI32 && at.dtype != DType::kI64) {
    return ctx.errorf("expected an i32 or i64 axis, got {}", dtype_name(at.dtype));
  }
  if (at.has_rank() && at.rank() > 1)
    return ctx.errorf("expected a scalar axis, got {}", at.to_string());
  if (in.has_rank() && in.rank() == 0)
    return ctx.error("expected an input of rank >= 1, got a scalar");
  if (std::optional<std::vector<int64_t>> axis = known_ints(ctx, 1); axis && in.has_rank()) {
    if (axis->size() != 1) return ctx.errorf("expected one axis, got {}", axis->size());
    const int rank = in.rank();
    if ((*axis)[0] < -rank || (*axis)[0] >= rank) {
      return ctx.errorf("expected axis in [{}, {}), got {}", -rank, rank, (*axis)[0]);
    }
  }
  return std::vector<ValueType>{in};
}

}  // namespace

template <>
InferResult infer_op(const ops::ReduceL1& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceL2& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceLogSum& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceLogSumExp& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceMax& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceMean& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceMin& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceProd& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceSum& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ReduceSumSquare& op, const InferContext& ctx) {
  return infer_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ArgMax& op, const InferContext& ctx) {
  return infer_arg_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::ArgMin& op, const InferContext& ctx) {
  return infer_arg_reduce(op, ctx);
}

template <>
InferResult infer_op(const ops::CumSum&, const InferContext& ctx) {
  return infer_cumulative(ctx);
}

template <>
InferResult infer_op(const ops::CumProd&, const InferContext& ctx) {
  return infer_cumulative(ctx);
}

template <>
InferResult infer_op(const ops::TopK& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_numeric(ctx, 0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& in = ctx.input(0);
  const TensorType& kt = ctx.input(1);
  if (kt.dtype != DType::kI64) return ctx.errorf("expected i64 k, got {}", dtype_name(kt.dtype));
  if (kt.has_rank() && kt.rank() > 1)
    return ctx.errorf("expected k of shape [1], got {}", kt.to_string());
  if (!in.has_rank()) {
    return std::vector<ValueType>{TensorType::unranked(in.dtype),
                                  TensorType::unranked(DType::kI64)};
  }
  const int rank = in.rank();
  if (op.axis < -rank || op.axis >= rank) {
    return ctx.errorf("expected axis in [{}, {}), got {}", -rank, rank, op.axis);
  }
  const auto axis = static_cast<size_t>(op.axis < 0 ? op.axis + rank : op.axis);
  std::vector<Dim> dims = *in.dims;
  dims[axis] = Dim();
  if (std::optional<std::vector<int64_t>> k = known_ints(ctx, 1)) {
    if (k->size() != 1) return ctx.errorf("expected one k value, got {}", k->size());
    const int64_t kv = (*k)[0];
    const Dim& n = (*in.dims)[axis];
    if (kv < 0 || (n.known() && kv > n.value)) {
      return ctx.errorf("expected k in [0, {}], got {}", n.known() ? std::to_string(n.value) : "?",
                        kv);
    }
    dims[axis] = Dim(kv);
  }
  return std::vector<ValueType>{TensorType(in.dtype, dims), TensorType(DType::kI64, dims)};
}

}  // namespace kiln::compiler
