// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the quantize op family.
#include "compiler/ops/quantize.h"

#include <algorithm>
#include <initializer_list>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/quantize_conv.h"

namespace kiln::compiler {

namespace {

std::string dtype_list(std::initializer_list<DType> allowed) {
  std::string out;
  for (DType d : allowed) out += (out.empty() ? "" : " or ") + std::string(dtype_name(d));
  return out;
}

// Input i is present, a tensor, and of one of the `allowed` element types.
Status require_dtype(const InferContext& ctx, int i, std::string_view name,
                     std::initializer_list<DType> allowed) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const DType d = ctx.input(i).dtype;
  if (std::find(allowed.begin(), allowed.end(), d) == allowed.end()) {
    return ctx.errorf("input {} ({}) must be {}, got {}", i, name, dtype_list(allowed),
                      ctx.input(i).to_string());
  }
  return Status();
}

// The element count of input i when its shape is static, else -1.
int64_t known_numel(const InferContext& ctx, int i) {
  const TensorType& t = ctx.input(i);
  return t.is_static() ? t.shape().numel() : -1;
}

// A scale or zero point of (De)QuantizeLinear: one value (a scalar or a 1-element tensor), a 1-D
// tensor with one value per slice of x along `axis`, or (block_size > 0) one value per block of
// block_size elements along `axis`: x's shape with ceil(dim / block_size) at `axis`.
Status check_axis_param(const InferContext& ctx, int i, std::string_view name, const TensorType& x,
                        int64_t axis, std::optional<int64_t> block) {
  const int64_t block_size = block.value_or(0);
  if (block_size < 0) return ctx.errorf("block_size must be 0 or positive, got {}", block_size);
  const TensorType& p = ctx.input(i);
  if (!p.has_rank() || known_numel(ctx, i) == 1) return Status();
  if (block_size == 0 && p.rank() != 1) {
    return ctx.errorf("input {} ({}) must be a scalar or 1-D (or give block_size), got {}", i, name,
                      p.to_string());
  }
  if (!x.has_rank()) return Status();
  if (axis < -x.rank() || axis >= x.rank()) {
    return ctx.errorf("axis {} is out of range for input 0 of rank {}", axis, x.rank());
  }
  const auto a = static_cast<size_t>(axis < 0 ? axis + x.rank() : axis);
  const Dim& dim = (*x.dims)[a];
  if (block_size == 0) {
    const Dim& len = (*p.dims)[0];
    if (len.known() && dim.known() && len.value != dim.value) {
      return ctx.errorf("input {} ({}) has {} values, but input 0 {} has {} along axis {}", i, name,
                        len.value, x.to_string(), dim.value, axis);
    }
    return Status();
  }
  if (p.rank() != x.rank()) {
    return ctx.errorf("input {} ({}) {} must have the rank of input 0 {} for blocked quantization",
                      i, name, p.to_string(), x.to_string());
  }
  for (size_t d = 0; d < p.dims->size(); ++d) {
    const Dim& pd = (*p.dims)[d];
    const Dim& xd = (*x.dims)[d];
    if (!pd.known() || !xd.known()) continue;
    const int64_t want = d == a ? (xd.value + block_size - 1) / block_size : xd.value;
    if (pd.value != want) {
      return ctx.errorf(
          "input {} ({}) {} does not fit input 0 {} in blocks of {} along axis {}: dim {} must be "
          "{}",
          i, name, p.to_string(), x.to_string(), block_size, axis, d, want);
    }
  }
  return Status();
}

// A zero point must match its scale's shape (when both are known).
Status check_same_shape(const InferContext& ctx, int scale, int zero_point) {
  if (!ctx.has_input(zero_point)) return Status();
  const TensorType& s = ctx.input(scale);
  const TensorType& z = ctx.input(zero_point);
  if (s.is_static() && z.is_static() && s.shape().numel() != z.shape().numel()) {
    return ctx.errorf("the zero point {} and the scale {} must have the same shape", z.to_string(),
                      s.to_string());
  }
  return Status();
}

// The numpy matmul shape of a and b (1-D operands are promoted and the added dim dropped).
Result<TensorType> matmul_type(const InferContext& ctx, const TensorType& a, const TensorType& b,
                               DType dtype) {
  if (!a.has_rank() || !b.has_rank()) return TensorType::unranked(dtype);
  if (a.rank() < 1 || b.rank() < 1) {
    return ctx.errorf("expected operands of rank >= 1, got {} and {}", a.to_string(),
                      b.to_string());
  }
  std::vector<Dim> da = *a.dims;
  std::vector<Dim> db = *b.dims;
  if (da.size() == 1) da.insert(da.begin(), Dim(1));
  if (db.size() == 1) db.push_back(Dim(1));
  const Dim& k1 = da.back();
  const Dim& k2 = db[db.size() - 2];
  if (k1.known() && k2.known() && k1.value != k2.value) {
    return ctx.errorf("inner dims of {} and {} differ", a.to_string(), b.to_string());
  }
  TensorType ba(dtype, std::vector<Dim>(da.begin(), da.end() - 2));
  TensorType bb(dtype, std::vector<Dim>(db.begin(), db.end() - 2));
  KILN_ASSIGN_OR_RETURN(TensorType out, broadcast_types(ctx, ba, bb));
  if (a.rank() > 1) out.dims->push_back(da[da.size() - 2]);
  if (b.rank() > 1) out.dims->push_back(db.back());
  return out;
}

// A zero point or scale of a matmul operand of shape [..., rows, cols]: one value, a 1-D tensor of
// `count` values (per row of A or per column of B), or the operand's batch dims with [count, 1]
// (A, rows) or [1, count] (B, columns) at the end.
Status check_matmul_param(const InferContext& ctx, int i, std::string_view name,
                          const TensorType& operand, bool per_row) {
  if (!ctx.has_input(i)) return Status();
  const TensorType& p = ctx.input(i);
  if (!p.has_rank() || !operand.has_rank() || known_numel(ctx, i) == 1) return Status();
  const int r = operand.rank();
  const auto& od = *operand.dims;
  const Dim count = r == 1 ? Dim(1) : per_row ? od[static_cast<size_t>(r - 2)] : od.back();
  auto mismatch = [&] {
    return ctx.errorf(
        "input {} ({}) {} does not fit operand {}: expected one value, one per {}, "
        "or one per {} of each matrix",
        i, name, p.to_string(), operand.to_string(), per_row ? "row" : "column",
        per_row ? "row" : "column");
  };
  auto fits = [](const Dim& a, const Dim& b) { return !a.known() || !b.known() || a == b; };
  if (p.rank() == 1) return fits((*p.dims)[0], count) ? Status() : mismatch();
  if (p.rank() != r || r < 2) return mismatch();
  const auto& pd = *p.dims;
  for (int d = 0; d < r - 2; ++d) {
    if (!fits(pd[static_cast<size_t>(d)], od[static_cast<size_t>(d)])) return mismatch();
  }
  const Dim& rows = pd[static_cast<size_t>(r - 2)];
  const Dim& cols = pd.back();
  const bool ok =
      per_row ? fits(rows, count) && fits(cols, Dim(1)) : fits(rows, Dim(1)) && fits(cols, count);
  return ok ? Status() : mismatch();
}

template <class ConvOp>
InferResult infer_conv(const ConvOp& op, const InferContext& ctx, int x_index, int w_index,
                       DType out_dtype) {
  const TensorType& x = ctx.input(x_index);
  const TensorType& w = ctx.input(w_index);
  if (x.has_rank() && x.rank() < 3) {
    return ctx.errorf("expected input x of rank >= 3 ([N, C, spatial...]), got {}", x.to_string());
  }
  if (x.has_rank() && w.has_rank() && w.rank() != x.rank()) {
    return ctx.errorf("expected weights w of the same rank as x {}, got {}", x.to_string(),
                      w.to_string());
  }
  if (op.group < 1) return ctx.errorf("expected group >= 1, got {}", op.group);
  const int rank = x.has_rank() ? x.rank() : w.rank();
  if (rank < 0) return std::vector<ValueType>{TensorType::unranked(out_dtype)};
  if (rank < 3) return ctx.errorf("expected weights of rank >= 3, got {}", w.to_string());
  std::vector<Dim> out(static_cast<size_t>(rank));
  std::vector<Dim> xd = x.has_rank() ? *x.dims : std::vector<Dim>(static_cast<size_t>(rank));
  std::vector<Dim> wd = w.has_rank() ? *w.dims : std::vector<Dim>(static_cast<size_t>(rank));
  if (wd[0].known() && wd[0].value % op.group != 0) {
    return ctx.errorf("the {} output channels of w {} do not divide into {} groups", wd[0].value,
                      w.to_string(), op.group);
  }
  if (xd[1].known() && wd[1].known() && xd[1].value != wd[1].value * op.group) {
    return ctx.errorf("x {} has {} channels, but w {} with group {} expects {}", x.to_string(),
                      xd[1].value, w.to_string(), op.group, wd[1].value * op.group);
  }
  const size_t n = static_cast<size_t>(rank - 2);
  if (op.kernel_shape) {
    if (op.kernel_shape->size() != n) {
      return ctx.errorf("expected {} kernel_shape values, got {}", n, op.kernel_shape->size());
    }
    for (size_t d = 0; d < n; ++d) {
      if (wd[d + 2].known() && wd[d + 2].value != (*op.kernel_shape)[d]) {
        return ctx.errorf("kernel_shape does not match the weights {}", w.to_string());
      }
      wd[d + 2] = Dim((*op.kernel_shape)[d]);
    }
  }
  out[0] = xd[0];
  out[1] = wd[0];
  std::vector<int64_t> in_sp, k_sp;
  for (size_t d = 0; d < n; ++d) {
    if (!xd[d + 2].known() || !wd[d + 2].known()) {
      return std::vector<ValueType>{TensorType(out_dtype, std::move(out))};
    }
    in_sp.push_back(xd[d + 2].value);
    k_sp.push_back(wd[d + 2].value);
  }
  Result<ConvGeometry> g =
      conv_geometry(in_sp, k_sp, op.auto_pad, op.strides, op.dilations, op.pads);
  if (!g.ok()) return ctx.error(g.status().message());
  for (size_t d = 0; d < n; ++d) out[d + 2] = Dim(g->output[d]);
  return std::vector<ValueType>{TensorType(out_dtype, std::move(out))};
}

constexpr std::initializer_list<DType> kQuantTypes = {DType::kU8, DType::kI8};
// What QuantizeLinear produces and DequantizeLinear reads (opset 25).
constexpr std::initializer_list<DType> kQdqTypes = {
    DType::kU8,         DType::kI8,     DType::kU16,        DType::kI16, DType::kF8E4M3FN,
    DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ, DType::kU4,  DType::kI4,
    DType::kF4E2M1,     DType::kU2,     DType::kI2};
constexpr std::initializer_list<DType> kRealTypes = {DType::kF32, DType::kF16, DType::kBF16};

bool one_of(DType d, std::initializer_list<DType> allowed) {
  return std::find(allowed.begin(), allowed.end(), d) != allowed.end();
}

}  // namespace

template <>
InferResult infer_op(const ops::QuantizeLinear& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(
      ctx, 0, "x", {DType::kF32, DType::kI32, DType::kF16, DType::kBF16, DType::kF64}));
  KILN_RETURN_IF_ERROR(require_dtype(
      ctx, 1, "y_scale", {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kF8E8M0}));
  DType out = op.output_dtype.value_or(DType::kU8);
  if (op.output_dtype && !one_of(*op.output_dtype, kQdqTypes)) {
    return ctx.errorf("output_dtype must be {}, got {}", dtype_list(kQdqTypes),
                      dtype_name(*op.output_dtype));
  }
  if (op.precision &&
      !one_of(*op.precision, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64})) {
    return ctx.errorf("precision must be a float type (f32, f16, bf16, f64), got {}",
                      dtype_name(*op.precision));
  }
  if (op.saturate && *op.saturate != 0 && *op.saturate != 1) {
    return ctx.errorf("attribute saturate must be 0 or 1, got {}", *op.saturate);
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "y_zero_point", kQdqTypes));
    if (op.output_dtype && *op.output_dtype != ctx.input(2).dtype) {
      return ctx.errorf("output_dtype {} differs from the zero point's type {}",
                        dtype_name(*op.output_dtype), dtype_name(ctx.input(2).dtype));
    }
    out = ctx.input(2).dtype;
    KILN_RETURN_IF_ERROR(
        check_axis_param(ctx, 2, "y_zero_point", ctx.input(0), op.axis, op.block_size));
    KILN_RETURN_IF_ERROR(check_same_shape(ctx, 1, 2));
  }
  KILN_RETURN_IF_ERROR(check_axis_param(ctx, 1, "y_scale", ctx.input(0), op.axis, op.block_size));
  TensorType t = ctx.input(0);
  t.dtype = out;
  return std::vector<ValueType>{t};
}

template <>
InferResult infer_op(const ops::DequantizeLinear& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  if (ctx.input(0).dtype != DType::kI32)
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "x", kQdqTypes));
  KILN_RETURN_IF_ERROR(
      require_dtype(ctx, 1, "x_scale", {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E8M0}));
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "x_zero_point", {ctx.input(0).dtype}));
    KILN_RETURN_IF_ERROR(
        check_axis_param(ctx, 2, "x_zero_point", ctx.input(0), op.axis, op.block_size));
    KILN_RETURN_IF_ERROR(check_same_shape(ctx, 1, 2));
  }
  KILN_RETURN_IF_ERROR(check_axis_param(ctx, 1, "x_scale", ctx.input(0), op.axis, op.block_size));
  const DType out = op.output_dtype.value_or(ctx.input(1).dtype);
  if (!one_of(out, kRealTypes)) {
    return ctx.errorf("the output type must be {}, got {}{}", dtype_list(kRealTypes),
                      dtype_name(out),
                      op.output_dtype ? "" : " (the scale's type): give output_dtype");
  }
  TensorType t = ctx.input(0);
  t.dtype = out;
  return std::vector<ValueType>{t};
}

template <>
InferResult infer_op(const ops::DynamicQuantizeLinear&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "x", {DType::kF32}));
  TensorType y = ctx.input(0);
  y.dtype = DType::kU8;
  return std::vector<ValueType>{y, TensorType(DType::kF32, std::vector<Dim>{}),
                                TensorType(DType::kU8, std::vector<Dim>{})};
}

template <>
InferResult infer_op(const ops::ConvInteger& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "x", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 1, "w", kQuantTypes));
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "x_zero_point", {ctx.input(0).dtype}));
    if (known_numel(ctx, 2) >= 0 && known_numel(ctx, 2) != 1) {
      return ctx.errorf("input 2 (x_zero_point) must hold one value, got {}",
                        ctx.input(2).to_string());
    }
  }
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 3, "w_zero_point", {ctx.input(1).dtype}));
    const TensorType& z = ctx.input(3);
    const TensorType& w = ctx.input(1);
    if (z.has_rank() && known_numel(ctx, 3) != 1) {
      const bool per_channel =
          z.rank() == 1 && w.has_rank() && w.rank() >= 1 &&
          (!(*z.dims)[0].known() || !(*w.dims)[0].known() || (*z.dims)[0] == (*w.dims)[0]);
      if (!per_channel) {
        return ctx.errorf(
            "input 3 (w_zero_point) must hold one value or one per output channel "
            "of w {}, got {}",
            w.to_string(), z.to_string());
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ValueType> out, infer_conv(op, ctx, 0, 1, DType::kI32));
  return out;
}

template <>
InferResult infer_op(const ops::MatMulInteger&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "A", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 1, "B", kQuantTypes));
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "a_zero_point", {ctx.input(0).dtype}));
    KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 2, "a_zero_point", ctx.input(0), true));
  }
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(require_dtype(ctx, 3, "b_zero_point", {ctx.input(1).dtype}));
    KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 3, "b_zero_point", ctx.input(1), false));
  }
  KILN_ASSIGN_OR_RETURN(TensorType out, matmul_type(ctx, ctx.input(0), ctx.input(1), DType::kI32));
  return std::vector<ValueType>{out};
}

template <>
InferResult infer_op(const ops::QLinearConv& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "x", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 1, "x_scale", {DType::kF32}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "x_zero_point", {ctx.input(0).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 3, "w", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 4, "w_scale", {DType::kF32}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 5, "w_zero_point", {ctx.input(3).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 6, "y_scale", {DType::kF32}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 7, "y_zero_point", kQuantTypes));
  if (ctx.has_input(8)) KILN_RETURN_IF_ERROR(require_dtype(ctx, 8, "B", {DType::kI32}));
  for (int i : {1, 2, 6, 7}) {
    if (known_numel(ctx, i) >= 0 && known_numel(ctx, i) != 1) {
      return ctx.errorf("input {} must hold one value, got {}", i, ctx.input(i).to_string());
    }
  }
  const TensorType& w = ctx.input(3);
  const Dim channels = w.has_rank() && w.rank() >= 1 ? (*w.dims)[0] : Dim();
  for (int i : {4, 5, 8}) {
    if (!ctx.has_input(i)) continue;
    const TensorType& p = ctx.input(i);
    if (!p.has_rank() || (i != 8 && known_numel(ctx, i) == 1)) continue;
    const bool ok =
        p.rank() == 1 && (!channels.known() || !(*p.dims)[0].known() || (*p.dims)[0] == channels);
    if (!ok) {
      return ctx.errorf("input {} {} must hold {}one value per output channel of w {}", i,
                        p.to_string(), i == 8 ? "" : "one value or ", w.to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ValueType> out, infer_conv(op, ctx, 0, 3, ctx.input(7).dtype));
  return out;
}

template <>
InferResult infer_op(const ops::QLinearMatMul&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 0, "a", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 1, "a_scale", kRealTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 2, "a_zero_point", {ctx.input(0).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 3, "b", kQuantTypes));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 4, "b_scale", {ctx.input(1).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 5, "b_zero_point", {ctx.input(3).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 6, "y_scale", {ctx.input(1).dtype}));
  KILN_RETURN_IF_ERROR(require_dtype(ctx, 7, "y_zero_point", kQuantTypes));
  KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 1, "a_scale", ctx.input(0), true));
  KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 2, "a_zero_point", ctx.input(0), true));
  KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 4, "b_scale", ctx.input(3), false));
  KILN_RETURN_IF_ERROR(check_matmul_param(ctx, 5, "b_zero_point", ctx.input(3), false));
  KILN_RETURN_IF_ERROR(check_same_shape(ctx, 1, 2));
  KILN_RETURN_IF_ERROR(check_same_shape(ctx, 4, 5));
  KILN_RETURN_IF_ERROR(check_same_shape(ctx, 6, 7));
  for (int i : {6, 7}) {
    if (known_numel(ctx, i) >= 0 && known_numel(ctx, i) != 1) {
      return ctx.errorf("input {} must hold one value, got {}", i, ctx.input(i).to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(TensorType out,
                        matmul_type(ctx, ctx.input(0), ctx.input(3), ctx.input(7).dtype));
  return std::vector<ValueType>{out};
}

}  // namespace kiln::compiler
