// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the attention op family's building blocks: RMSNormalization,
// RotaryEmbedding, CausalConvWithState and TensorScatter.
#include "compiler/ops/attention.h"
#include "compiler/ops/attention_util.h"
#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

using attention::check_arity;
using attention::check_float;
using attention::dim_at;
using attention::div_dim;
using attention::match_dim;

}  // namespace

template <>
InferResult infer_op(const ops::RMSNormalization& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2));
  KILN_RETURN_IF_ERROR(check_float(ctx, 0));
  KILN_RETURN_IF_ERROR(check_float(ctx, 1));
  if (!dtype_is_float(op.stash_type)) {
    return ctx.errorf("expected a float stash_type, got {}", dtype_name(op.stash_type));
  }
  const TensorType& x = ctx.input(0);
  const TensorType& scale = ctx.input(1);
  if (!x.has_rank()) return std::vector<ValueType>{TensorType::unranked(scale.dtype)};
  const int rank = x.rank();
  if (rank < 1 || op.axis < -rank || op.axis >= rank) {
    return ctx.errorf("axis {} is out of range for input {}", op.axis, x.to_string());
  }
  const auto axis = static_cast<size_t>(op.axis < 0 ? op.axis + rank : op.axis);
  if (scale.has_rank()) {
    const std::vector<Dim> normalized(x.dims->begin() + static_cast<std::ptrdiff_t>(axis),
                                      x.dims->end());
    bool fits = scale.dims->size() <= normalized.size();
    for (size_t i = 0; fits && i < scale.dims->size(); ++i) {
      const Dim& s = (*scale.dims)[i];
      const Dim& n = normalized[i + normalized.size() - scale.dims->size()];
      fits = !s.known() || !n.known() || s.value == 1 || s.value == n.value;
    }
    if (!fits) {
      return ctx.errorf("scale {} does not broadcast to the normalized dims of {}",
                        scale.to_string(), x.to_string());
    }
  }
  return std::vector<ValueType>{TensorType(scale.dtype, *x.dims)};
}

template <>
InferResult infer_op(const ops::RotaryEmbedding& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 4));
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(check_float(ctx, i));
  const TensorType& x = ctx.input(0);
  for (int i = 1; i < 3; ++i) {
    if (ctx.input(i).dtype != x.dtype) {
      return ctx.errorf("input {} must have the input's element type {}, got {}", i,
                        dtype_name(x.dtype), ctx.input(i).to_string());
    }
  }
  if (op.interleaved != 0 && op.interleaved != 1) {
    return ctx.errorf("expected interleaved 0 or 1, got {}", op.interleaved);
  }
  if (op.rotary_embedding_dim < 0 || op.rotary_embedding_dim % 2 != 0) {
    return ctx.errorf("expected an even rotary_embedding_dim >= 0, got {}",
                      op.rotary_embedding_dim);
  }
  if (!x.has_rank()) return std::vector<ValueType>{x};
  if (x.rank() != 3 && x.rank() != 4) {
    return ctx.errorf("the input must be 3-D or 4-D, got {}", x.to_string());
  }
  Dim head_size = dim_at(x, 3), len = dim_at(x, 2);
  if (x.rank() == 3) {
    if (!op.num_heads || *op.num_heads <= 0) {
      return ctx.error("a 3-D input needs a positive num_heads attribute");
    }
    KILN_ASSIGN_OR_RETURN(head_size, div_dim(ctx, dim_at(x, 2), *op.num_heads, "the input"));
    len = dim_at(x, 1);
  }
  if (head_size.known()) {
    const int64_t rotated =
        op.rotary_embedding_dim == 0 ? head_size.value : op.rotary_embedding_dim;
    if (rotated > head_size.value || rotated % 2 != 0) {
      return ctx.errorf("cannot rotate {} of the {} values of a head (even, at most the head)",
                        rotated, head_size.value);
    }
    for (int i = 1; i < 3; ++i) {
      const TensorType& c = ctx.input(i);
      if (!c.has_rank()) continue;
      KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(c, c.rank() - 1), Dim(rotated / 2),
                                     "the cos/sin cache width and half the rotated values")
                               .status());
    }
  }
  const int cache_rank = ctx.has_input(3) ? 2 : 3;
  for (int i = 1; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.require_input(i, cache_rank));
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(3, 2));
    const TensorType& ids = ctx.input(3);
    if (ids.dtype != DType::kI64) {
      return ctx.errorf("position_ids must be i64, got {}", ids.to_string());
    }
    KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(ids, 0), dim_at(x, 0), "batches").status());
    KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(ids, 1), len, "sequence lengths").status());
  } else {
    for (int i = 1; i < 3; ++i) {
      KILN_RETURN_IF_ERROR(
          match_dim(ctx, dim_at(ctx.input(i), 0), dim_at(x, 0), "batches").status());
      KILN_RETURN_IF_ERROR(
          match_dim(ctx, dim_at(ctx.input(i), 1), len, "sequence lengths").status());
    }
  }
  return std::vector<ValueType>{x};
}

template <>
InferResult infer_op(const ops::CausalConvWithState& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 4));
  if (op.activation != "none" && op.activation != "silu" && op.activation != "swish") {
    return ctx.errorf("expected activation none, silu or swish, got \"{}\"", op.activation);
  }
  KILN_RETURN_IF_ERROR(check_float(ctx, 0));
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 3));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 3));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  for (int i = 1; i < 4; ++i) {
    if (ctx.has_input(i) && ctx.input(i).dtype != x.dtype) {
      return ctx.errorf("input {} must have the input's element type {}, got {}", i,
                        dtype_name(x.dtype), ctx.input(i).to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(Dim channels,
                        match_dim(ctx, dim_at(x, 1), dim_at(w, 0), "input and weight channels"));
  if (dim_at(w, 1).known() && dim_at(w, 1).value != 1) {
    return ctx.errorf("the weight must be (channels, 1, k), got {}", w.to_string());
  }
  const Dim k = dim_at(w, 2);
  if (k.known() && k.value < 1) return ctx.errorf("the kernel size must be >= 1, got {}", k.value);
  const Dim carry = k.known() ? Dim(k.value - 1) : Dim();
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    KILN_RETURN_IF_ERROR(
        match_dim(ctx, dim_at(ctx.input(2), 0), channels, "bias and channels").status());
  }
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(3, 3));
    const TensorType& s = ctx.input(3);
    KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(s, 0), dim_at(x, 0), "past_state's batch").status());
    KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(s, 1), channels, "past_state's channels").status());
    KILN_RETURN_IF_ERROR(
        match_dim(ctx, dim_at(s, 2), carry, "past_state's length and k - 1").status());
  }
  return std::vector<ValueType>{x, TensorType(x.dtype, {dim_at(x, 0), channels, carry})};
}

template <>
InferResult infer_op(const ops::TensorScatter& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 3));
  if (op.mode != "linear" && op.mode != "circular") {
    return ctx.errorf("expected mode linear or circular, got \"{}\"", op.mode);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& cache = ctx.input(0);
  const TensorType& update = ctx.input(1);
  if (update.dtype != cache.dtype) {
    return ctx.errorf("update must have the cache's element type {}, got {}",
                      dtype_name(cache.dtype), update.to_string());
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    if (ctx.input(2).dtype != DType::kI64) {
      return ctx.errorf("write_indices must be i64, got {}", ctx.input(2).to_string());
    }
    KILN_RETURN_IF_ERROR(
        match_dim(ctx, dim_at(ctx.input(2), 0), dim_at(cache, 0), "write_indices' batch").status());
  }
  if (!cache.has_rank()) return std::vector<ValueType>{cache};
  const int rank = cache.rank();
  if (op.axis < -rank || op.axis >= rank || op.axis == 0 || op.axis == -rank) {
    return ctx.errorf("axis {} must name a dim of {} other than the batch", op.axis,
                      cache.to_string());
  }
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + rank : op.axis);
  if (update.has_rank()) {
    if (update.rank() != rank) {
      return ctx.errorf("update {} must have the cache's rank {}", update.to_string(), rank);
    }
    for (int d = 0; d < rank; ++d) {
      const Dim c = dim_at(cache, d), u = dim_at(update, d);
      if (!c.known() || !u.known()) continue;
      if (d == axis ? u.value > c.value : u.value != c.value) {
        return ctx.errorf("update {} does not fit the cache {} (dims equal but along axis {})",
                          update.to_string(), cache.to_string(), axis);
      }
    }
  }
  return std::vector<ValueType>{cache};
}

}  // namespace kiln::compiler
