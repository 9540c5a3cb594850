// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the attention family's inference.
#include "compiler/ops/attention_util.h"

namespace kiln::compiler::attention {

Status check_arity(const InferContext& ctx, int min, int max) {
  if (ctx.num_inputs() < min || ctx.num_inputs() > max) {
    if (min == max) return ctx.errorf("expected {} input(s), got {}", min, ctx.num_inputs());
    return ctx.errorf("expected {} to {} inputs, got {}", min, max, ctx.num_inputs());
  }
  return Status();
}

Status check_float(const InferContext& ctx, int i) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const DType d = ctx.input(i).dtype;
  if (!dtype_is_float(d)) {
    return ctx.errorf("input {} must be a float type (f16, bf16, f32, f64), got {}", i,
                      dtype_name(d));
  }
  return Status();
}

Status check_heads(const InferContext& ctx, int64_t q_heads, int64_t kv_heads) {
  if (q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0) {
    return ctx.errorf("the {} query heads must be a positive multiple of the {} key/value heads",
                      q_heads, kv_heads);
  }
  return Status();
}

Dim dim_at(const TensorType& t, int i) {
  if (!t.has_rank() || i < 0 || i >= t.rank()) return Dim();
  return (*t.dims)[static_cast<size_t>(i)];
}

Dim mul_dim(const Dim& a, const Dim& b) {
  return a.known() && b.known() ? Dim(a.value * b.value) : Dim();
}

Result<Dim> div_dim(const InferContext& ctx, const Dim& d, int64_t parts, std::string_view what) {
  if (!d.known()) return Dim();
  if (parts <= 0 || d.value % parts != 0) {
    return ctx.errorf("{}'s {} values do not split into {} heads", what, d.value, parts);
  }
  return Dim(d.value / parts);
}

Result<Dim> match_dim(const InferContext& ctx, const Dim& a, const Dim& b, std::string_view what) {
  if (a.known() && b.known() && a.value != b.value) {
    return ctx.errorf("{} differ: {} and {}", what, a.value, b.value);
  }
  return a.known() ? a : b;
}

}  // namespace kiln::compiler::attention
