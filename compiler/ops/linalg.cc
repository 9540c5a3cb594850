// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the linalg op family.
#include "compiler/ops/linalg.h"

#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/linalg_einsum.h"

namespace kiln::compiler {

namespace {

bool is_numeric(DType dt) {
  return dt != DType::kString && dt != DType::kBool;
}

// Inputs [first, last] (those present) share input `first`'s numeric dtype.
Status require_same_numeric(const InferContext& ctx, int first, int last) {
  const DType dt = ctx.input(first).dtype;
  if (!is_numeric(dt)) return ctx.errorf("expected numeric inputs, got {}", dtype_name(dt));
  for (int i = first + 1; i <= last; ++i) {
    if (ctx.has_input(i) && ctx.input(i).dtype != dt) {
      return ctx.errorf("expected input {} of type {}, got {}", i, dtype_name(dt),
                        dtype_name(ctx.input(i).dtype));
    }
  }
  return Status();
}

// The dim both `a` and `b` describe: equal when known; an unknown one takes the other.
Result<Dim> same_dim(const InferContext& ctx, const Dim& a, const Dim& b, std::string_view what) {
  if (a.known() && b.known() && a.value != b.value) {
    return ctx.errorf("expected equal {} dims, got {} and {}", what, a.value, b.value);
  }
  return a.known() ? a : b;
}

}  // namespace

template <>
InferResult infer_op(const ops::Gemm& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 2));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 2));
  KILN_RETURN_IF_ERROR(require_same_numeric(ctx, 0, 2));
  if (!ctx.input(0).has_rank() || !ctx.input(1).has_rank()) {
    // An input of unknown rank (a subgraph's untyped value) still makes a matrix.
    return std::vector<ValueType>{TensorType(ctx.input(0).dtype, std::vector<Dim>{Dim(), Dim()})};
  }
  const std::vector<Dim>& a = *ctx.input(0).dims;
  const std::vector<Dim>& b = *ctx.input(1).dims;
  const Dim m = a[op.transA != 0 ? 1 : 0];
  const Dim n = b[op.transB != 0 ? 0 : 1];
  KILN_RETURN_IF_ERROR(
      same_dim(ctx, a[op.transA != 0 ? 0 : 1], b[op.transB != 0 ? 1 : 0], "inner (K)").status());
  std::vector<Dim> out = {m, n};
  if (ctx.has_input(2)) {
    const TensorType& c = ctx.input(2);
    if (c.has_rank()) {
      if (c.rank() > 2) return ctx.errorf("expected C of rank <= 2, got {}", c.to_string());
      for (int i = 0; i < c.rank(); ++i) {
        const Dim& cd = (*c.dims)[static_cast<size_t>(i)];
        const Dim& od = out[static_cast<size_t>(i + 2 - c.rank())];
        if (cd.known() && cd.value != 1 && od.known() && cd.value != od.value) {
          return ctx.errorf("expected C to broadcast to [{},{}], got {}", m.value, n.value,
                            c.to_string());
        }
      }
    }
  }
  return std::vector<ValueType>{TensorType(ctx.input(0).dtype, std::move(out))};
}

template <>
InferResult infer_op(const ops::MatMul&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  KILN_RETURN_IF_ERROR(require_same_numeric(ctx, 0, 1));
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (!a.has_rank() || !b.has_rank()) return std::vector<ValueType>{TensorType::unranked(a.dtype)};
  if (a.rank() == 0 || b.rank() == 0) {
    return ctx.errorf("expected inputs of rank >= 1, got {} and {}", a.to_string(), b.to_string());
  }
  const std::vector<Dim>& ad = *a.dims;
  const std::vector<Dim>& bd = *b.dims;
  const Dim ka = ad.back();
  const Dim kb = b.rank() == 1 ? bd[0] : bd[bd.size() - 2];
  KILN_RETURN_IF_ERROR(same_dim(ctx, ka, kb, "inner (K)").status());
  TensorType a_batch(a.dtype,
                     std::vector<Dim>(ad.begin(), ad.end() - std::min<ptrdiff_t>(2, a.rank())));
  TensorType b_batch(b.dtype,
                     std::vector<Dim>(bd.begin(), bd.end() - std::min<ptrdiff_t>(2, b.rank())));
  KILN_ASSIGN_OR_RETURN(TensorType out, broadcast_types(ctx, a_batch, b_batch));
  if (a.rank() > 1) out.dims->push_back(ad[ad.size() - 2]);
  if (b.rank() > 1) out.dims->push_back(bd.back());
  return std::vector<ValueType>{out};
}

template <>
InferResult infer_op(const ops::Einsum& op, const InferContext& ctx) {
  if (!op.equation) return ctx.error("expected the attribute equation, got none");
  if (ctx.num_inputs() == 0) return ctx.error("expected at least one input, got none");
  std::vector<int> ranks;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_input(i));
    ranks.push_back(ctx.input(i).rank());
  }
  KILN_RETURN_IF_ERROR(require_same_numeric(ctx, 0, ctx.num_inputs() - 1));
  const DType dt = ctx.input(0).dtype;
  for (int r : ranks) {
    if (r < 0) return std::vector<ValueType>{TensorType::unranked(dt)};
  }
  Result<EinsumEquation> eq = parse_einsum(*op.equation, ranks);
  if (!eq.ok()) return ctx.error(eq.status().message());
  std::vector<Dim> sizes(static_cast<size_t>(eq->num_labels));
  std::vector<bool> seen(static_cast<size_t>(eq->num_labels), false);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const std::vector<Dim>& dims = *ctx.input(i).dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      const auto l = static_cast<size_t>(eq->inputs[static_cast<size_t>(i)][d]);
      Dim& s = sizes[l];
      const Dim& x = dims[d];
      const bool ellipsis = l >= static_cast<size_t>(EinsumEquation::kNumLetters);
      if (!seen[l]) {
        s = x;
        seen[l] = true;
      } else if (ellipsis && x.known() && x.value == 1) {
        continue;  // ellipsis dims broadcast
      } else if (ellipsis && s.known() && s.value == 1) {
        s = x;
      } else {
        KILN_ASSIGN_OR_RETURN(s, same_dim(ctx, s, x, "einsum label"));
      }
    }
  }
  std::vector<Dim> out;
  for (int l : eq->output) out.push_back(sizes[static_cast<size_t>(l)]);
  return std::vector<ValueType>{TensorType(dt, std::move(out))};
}

template <>
InferResult infer_op(const ops::Det&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (x.dtype != DType::kF32 && x.dtype != DType::kF64 && x.dtype != DType::kF16 &&
      x.dtype != DType::kBF16) {
    return ctx.errorf("expected a floating-point input, got {}", dtype_name(x.dtype));
  }
  if (!x.has_rank()) return std::vector<ValueType>{TensorType::unranked(x.dtype)};
  if (x.rank() < 2) return ctx.errorf("expected an input of rank >= 2, got {}", x.to_string());
  const std::vector<Dim>& d = *x.dims;
  KILN_RETURN_IF_ERROR(same_dim(ctx, d[d.size() - 2], d.back(), "square matrix").status());
  return std::vector<ValueType>{TensorType(x.dtype, std::vector<Dim>(d.begin(), d.end() - 2))};
}

}  // namespace kiln::compiler
