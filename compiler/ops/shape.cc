// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the shape op family.
#include "compiler/ops/shape.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/shape_util.h"

namespace kiln::compiler {

namespace {

bool is_index_dtype(DType d) {
  return d == DType::kI32 || d == DType::kI64;
}

// Fails unless input i is present and an i32/i64 tensor (of rank `rank` when rank >= 0).
Status require_ints(const InferContext& ctx, int i, std::string_view what, int rank = -1) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i, rank));
  if (!is_index_dtype(ctx.input(i).dtype)) {
    return ctx.errorf("expected {} (input {}) to be i32 or i64, got {}", what, i,
                      ctx.input(i).to_string());
  }
  return Status();
}

// Squeeze/Unsqueeze axes: i32/i64 of rank 1 (rank 0 accepted, as other runtimes do).
Status require_axes(const InferContext& ctx, int i) {
  KILN_RETURN_IF_ERROR(require_ints(ctx, i, "axes"));
  if (ctx.input(i).rank() > 1)
    return ctx.errorf("expected 1-D axes, got {}", ctx.input(i).to_string());
  return Status();
}

// Product of dims [begin, end); unknown when any of them is, or when it overflows.
Dim dim_product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  const Dim* unknown = nullptr;
  for (size_t i = begin; i < end; ++i) {
    if (!dims[i].known()) {
      if (unknown != nullptr) return Dim();
      unknown = &dims[i];
      continue;
    }
    if (__builtin_mul_overflow(p, dims[i].value, &p)) return Dim();
  }
  // One unknown dim times ones keeps its symbol: [batch,1] -> batch.
  if (unknown != nullptr) return p == 1 ? *unknown : Dim();
  return Dim(p);
}

// a * b, or an error when it overflows.
Result<int64_t> checked_mul(const InferContext& ctx, int64_t a, int64_t b) {
  int64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p)) return ctx.errorf("dim {} * {} overflows", a, b);
  return p;
}

// x * k for a known dim, else unknown.
Result<Dim> mul_dim(const InferContext& ctx, const Dim& x, int64_t k) {
  if (!x.known()) return Dim();
  KILN_ASSIGN_OR_RETURN(int64_t p, checked_mul(ctx, x.value, k));
  return Dim(p);
}

Result<int> axis_in(const InferContext& ctx, int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return ctx.errorf("expected {} in [{}, {}], got {}", what, -rank, rank - 1, axis);
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<ValueType> one(TensorType t) {
  return {ValueType(std::move(t))};
}

// A helper's result, with its error naming the node.
template <class T>
Result<T> named(const InferContext& ctx, Result<T> r) {
  if (!r.ok()) return ctx.error(r.status().message());
  return r;
}

std::vector<int64_t> dim_values(const std::vector<Dim>& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.known() ? d.value : -1);
  return out;
}

}  // namespace

template <>
InferResult infer_op(const ops::Reshape& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "shape", 1));
  const TensorType& in = ctx.input(0);
  std::optional<std::vector<int64_t>> shape = known_ints(ctx, 1);
  if (!shape) {
    const TensorType& st = ctx.input(1);
    if (st.has_rank() && (*st.dims)[0].known()) {
      return one(unknown_dims(in.dtype, static_cast<int>((*st.dims)[0].value)));
    }
    return one(TensorType::unranked(in.dtype));
  }
  std::vector<Dim> out(shape->size());
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t s = (*shape)[i];
    if (s == -1) {
      if (infer_at >= 0)
        return ctx.errorf("expected at most one -1 in shape, got [{}]", fmt::join(*shape, ","));
      infer_at = static_cast<int>(i);
    } else if (s == 0 && op.allowzero == 0) {
      if (!in.has_rank()) {
        out[i] = Dim();
      } else if (static_cast<int>(i) >= in.rank()) {
        return ctx.errorf("shape[{}] is 0 (copy the input dim), but the input {} has rank {}", i,
                          in.to_string(), in.rank());
      } else {
        out[i] = (*in.dims)[i];
      }
    } else if (s < 0) {
      return ctx.errorf("expected shape values >= -1, got [{}]", fmt::join(*shape, ","));
    } else {
      has_zero |= s == 0;
      out[i] = Dim(s);
    }
  }
  if (has_zero && infer_at >= 0) {
    return ctx.errorf("shape [{}] has both 0 and -1, which allowzero=1 forbids",
                      fmt::join(*shape, ","));
  }
  Dim in_numel = in.has_rank() ? dim_product(*in.dims, 0, in.dims->size()) : Dim();
  Dim known_part = dim_product(out, 0, out.size());
  if (infer_at >= 0) {
    std::vector<Dim> rest = out;
    rest[static_cast<size_t>(infer_at)] = Dim(1);
    Dim p = dim_product(rest, 0, rest.size());
    const bool all_known =
        std::all_of(rest.begin(), rest.end(), [](const Dim& d) { return d.known(); });
    if (in_numel.known() && all_known && !p.known()) {
      return ctx.errorf("cannot reshape {} to [{}]", in.to_string(), fmt::join(*shape, ","));
    }
    if (in_numel.known() && p.known()) {
      if (p.value == 0 || in_numel.value % p.value != 0) {
        return ctx.errorf("cannot reshape {} to [{}]", in.to_string(), fmt::join(*shape, ","));
      }
      out[static_cast<size_t>(infer_at)] = Dim(in_numel.value / p.value);
    }
  } else if (in_numel.known() && (!known_part.known() || in_numel.value != known_part.value) &&
             std::all_of(out.begin(), out.end(), [](const Dim& d) { return d.known(); })) {
    return ctx.errorf("cannot reshape {} ({} elements) to [{}]", in.to_string(), in_numel.value,
                      fmt::join(*shape, ","));
  }
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Flatten& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return one(unknown_dims(in.dtype, 2));
  const int r = in.rank();
  if (op.axis < -r || op.axis > r)
    return ctx.errorf("expected axis in [{}, {}], got {}", -r, r, op.axis);
  const auto axis = static_cast<size_t>(op.axis < 0 ? op.axis + r : op.axis);
  return one(TensorType(
      in.dtype, {dim_product(*in.dims, 0, axis), dim_product(*in.dims, axis, in.dims->size())}));
}

template <>
InferResult infer_op(const ops::Squeeze&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (ctx.has_input(1)) KILN_RETURN_IF_ERROR(require_axes(ctx, 1));
  if (!in.has_rank()) return one(in);
  const int r = in.rank();
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (ctx.has_input(1)) {
    std::optional<std::vector<int64_t>> axes = known_ints(ctx, 1);
    if (!axes) {
      const TensorType& at = ctx.input(1);
      if (at.is_static())
        return one(unknown_dims(in.dtype, r - static_cast<int>(at.shape().numel())));
      return one(TensorType::unranked(in.dtype));
    }
    for (int64_t a : *axes) {
      KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, a, r, "axes"));
      const Dim& d = (*in.dims)[static_cast<size_t>(axis)];
      if (d.known() && d.value != 1) {
        return ctx.errorf("cannot squeeze axis {} of {}: its size is not 1", a, in.to_string());
      }
      if (drop[static_cast<size_t>(axis)]) return ctx.errorf("axis {} is repeated in axes", a);
      drop[static_cast<size_t>(axis)] = true;
    }
  } else {
    for (int i = 0; i < r; ++i) {
      const Dim& d = (*in.dims)[static_cast<size_t>(i)];
      if (!d.known()) return one(TensorType::unranked(in.dtype));
      drop[static_cast<size_t>(i)] = d.value == 1;
    }
  }
  std::vector<Dim> out;
  for (int i = 0; i < r; ++i) {
    if (!drop[static_cast<size_t>(i)]) out.push_back((*in.dims)[static_cast<size_t>(i)]);
  }
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Unsqueeze&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_axes(ctx, 1));
  const TensorType& in = ctx.input(0);
  std::optional<std::vector<int64_t>> axes = known_ints(ctx, 1);
  if (!in.has_rank()) return one(in);
  if (!axes) {
    const TensorType& at = ctx.input(1);
    if (at.is_static())
      return one(unknown_dims(in.dtype, in.rank() + static_cast<int>(at.shape().numel())));
    return one(TensorType::unranked(in.dtype));
  }
  const int r = in.rank() + static_cast<int>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(r), false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, a, r, "axes"));
    if (inserted[static_cast<size_t>(axis)]) return ctx.errorf("axis {} is repeated in axes", a);
    inserted[static_cast<size_t>(axis)] = true;
  }
  std::vector<Dim> out;
  size_t next = 0;
  for (int i = 0; i < r; ++i) {
    out.push_back(inserted[static_cast<size_t>(i)] ? Dim(1) : (*in.dims)[next++]);
  }
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Transpose& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) {
    return one(op.perm ? unknown_dims(in.dtype, static_cast<int>(op.perm->size())) : in);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, named(ctx, transpose_perm(op, in.rank())));
  std::vector<Dim> out;
  for (int64_t p : perm) out.push_back((*in.dims)[static_cast<size_t>(p)]);
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Concat& op, const InferContext& ctx) {
  if (!op.axis) return ctx.error("expected the axis attribute");
  if (ctx.num_inputs() < 1) return ctx.error("expected at least one input");
  std::optional<TensorType> out;  // the first ranked input, merged with the others
  bool any_unranked = false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_input(i));
    const TensorType& t = ctx.input(i);
    if (t.dtype != ctx.input(0).dtype) {
      return ctx.errorf("expected every input to be {}, input {} is {}",
                        dtype_name(ctx.input(0).dtype), i, t.to_string());
    }
    if (!t.has_rank()) {
      any_unranked = true;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, *op.axis, t.rank(), "axis"));
    if (!out) {
      out = t;
      continue;
    }
    if (out->rank() != t.rank()) {
      return ctx.errorf("expected every input to have rank {}, input {} is {}", out->rank(), i,
                        t.to_string());
    }
    for (int d = 0; d < t.rank(); ++d) {
      Dim& o = (*out->dims)[static_cast<size_t>(d)];
      const Dim& x = (*t.dims)[static_cast<size_t>(d)];
      if (d == axis) {
        o = o.known() && x.known() ? Dim(o.value + x.value) : Dim();
      } else if (o.known() && x.known() && o.value != x.value) {
        return ctx.errorf("input {} is {}, which does not match the others outside axis {}", i,
                          t.to_string(), *op.axis);
      } else if (!o.known()) {
        o = x;
      }
    }
  }
  if (!out) return one(TensorType::unranked(ctx.input(0).dtype));
  if (any_unranked) {
    const int64_t axis = *op.axis < 0 ? *op.axis + out->rank() : *op.axis;
    (*out->dims)[static_cast<size_t>(axis)] = Dim();
  }
  return one(*out);
}

template <>
InferResult infer_op(const ops::Split& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  const int n = ctx.num_outputs();
  if (n < 1) return ctx.error("expected at least one output");
  if (op.num_outputs) {
    if (ctx.has_input(1)) return ctx.error("expected split sizes or num_outputs, got both");
    if (*op.num_outputs != n) {
      return ctx.errorf("num_outputs is {}, but the node has {} outputs", *op.num_outputs, n);
    }
  }
  std::optional<std::vector<int64_t>> split;
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "split", 1));
    split = known_ints(ctx, 1);
  }
  if (!in.has_rank())
    return std::vector<ValueType>(static_cast<size_t>(n), TensorType::unranked(in.dtype));
  KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, op.axis, in.rank(), "axis"));
  const Dim dim = (*in.dims)[static_cast<size_t>(axis)];
  std::vector<Dim> sizes(static_cast<size_t>(n));
  if (split) {
    if (static_cast<int>(split->size()) != n) {
      return ctx.errorf("expected {} split sizes (one per output), got {}", n, split->size());
    }
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) return ctx.errorf("expected split sizes >= 0, got [{}]", fmt::join(*split, ","));
      sum += s;
    }
    if (dim.known() && sum != dim.value) {
      return ctx.errorf("split sizes [{}] do not add up to {} (axis {} of {})",
                        fmt::join(*split, ","), dim.value, op.axis, in.to_string());
    }
    for (int i = 0; i < n; ++i)
      sizes[static_cast<size_t>(i)] = Dim((*split)[static_cast<size_t>(i)]);
  } else if (op.num_outputs && dim.known()) {
    const int64_t part = (dim.value + n - 1) / n;
    const int64_t last = dim.value - part * (n - 1);
    if (last < 0) {
      return ctx.errorf("cannot split axis {} of {} into {} parts of {} (the last one would be {})",
                        op.axis, in.to_string(), n, part, last);
    }
    for (int i = 0; i < n; ++i) sizes[static_cast<size_t>(i)] = Dim(i + 1 < n ? part : last);
  } else if (!ctx.has_input(1) && dim.known()) {
    if (dim.value % n != 0) {
      return ctx.errorf("cannot split axis {} of {} into {} equal parts", op.axis, in.to_string(),
                        n);
    }
    for (Dim& s : sizes) s = Dim(dim.value / n);
  }
  std::vector<ValueType> out;
  for (const Dim& s : sizes) {
    TensorType t = in;
    (*t.dims)[static_cast<size_t>(axis)] = s;
    out.emplace_back(std::move(t));
  }
  return out;
}

template <>
InferResult infer_op(const ops::Slice&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "starts", 1));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 2, "ends", 1));
  if (ctx.has_input(3)) KILN_RETURN_IF_ERROR(require_ints(ctx, 3, "axes", 1));
  if (ctx.has_input(4)) KILN_RETURN_IF_ERROR(require_ints(ctx, 4, "steps", 1));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return one(in);
  std::optional<std::vector<int64_t>> starts = known_ints(ctx, 1), ends = known_ints(ctx, 2);
  std::optional<std::vector<int64_t>> axes = ctx.has_input(3) ? known_ints(ctx, 3) : std::nullopt;
  std::optional<std::vector<int64_t>> steps = ctx.has_input(4) ? known_ints(ctx, 4) : std::nullopt;
  const bool known = starts && ends && (axes || !ctx.has_input(3)) && (steps || !ctx.has_input(4));
  if (!known) {
    std::vector<Dim> out = *in.dims;
    if (axes) {
      for (int64_t a : *axes) {
        KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, a, in.rank(), "axes"));
        out[static_cast<size_t>(axis)] = Dim();
      }
    } else {
      out.assign(out.size(), Dim());
    }
    return one(TensorType(in.dtype, std::move(out)));
  }
  std::vector<Dim> out = *in.dims;
  KILN_ASSIGN_OR_RETURN(
      std::vector<SliceAxis> sl,
      named(ctx, resolve_slice(dim_values(*in.dims), *starts, *ends, axes, steps)));
  for (const SliceAxis& s : sl)
    out[static_cast<size_t>(s.axis)] = s.count >= 0 ? Dim(s.count) : Dim();
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Tile&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "repeats", 1));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return one(in);
  std::optional<std::vector<int64_t>> repeats = known_ints(ctx, 1);
  if (!repeats) return one(unknown_dims(in.dtype, in.rank()));
  if (static_cast<int>(repeats->size()) != in.rank()) {
    return ctx.errorf("expected {} repeats (the input's rank), got {}", in.rank(), repeats->size());
  }
  std::vector<Dim> out = *in.dims;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t r = (*repeats)[i];
    if (r < 0) return ctx.errorf("expected repeats >= 0, got [{}]", fmt::join(*repeats, ","));
    if (r == 0) {
      out[i] = Dim(0);
    } else {
      KILN_ASSIGN_OR_RETURN(out[i], mul_dim(ctx, out[i], r));
    }
  }
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Expand&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "shape", 1));
  const TensorType& in = ctx.input(0);
  std::optional<std::vector<int64_t>> shape = known_ints(ctx, 1);
  if (!shape) {
    const TensorType& st = ctx.input(1);
    if (in.has_rank() && st.has_rank() && (*st.dims)[0].known()) {
      return one(
          unknown_dims(in.dtype, std::max<int>(in.rank(), static_cast<int>((*st.dims)[0].value))));
    }
    return one(TensorType::unranked(in.dtype));
  }
  std::vector<Dim> target;
  for (int64_t s : *shape) {
    if (s < 0) return ctx.errorf("expected shape values >= 0, got [{}]", fmt::join(*shape, ","));
    target.emplace_back(s);
  }
  KILN_ASSIGN_OR_RETURN(TensorType out,
                        broadcast_types(ctx, in, TensorType(in.dtype, std::move(target))));
  return one(std::move(out));
}

namespace {

// Pad's pads for every axis ([begins..., ends...] over the input's rank) from the given pads and,
// when given, the axes they are for (opset 18); checks their counts and the axes.
Result<std::vector<int64_t>> pads_of_all_axes(const InferContext& ctx,
                                              const std::vector<int64_t>& pads,
                                              const std::optional<std::vector<int64_t>>& axes,
                                              const TensorType& in) {
  const int r = in.rank();
  if (!axes) {
    if (static_cast<int>(pads.size()) != 2 * r) {
      return ctx.errorf("expected {} pads (twice the input's rank), got {}", 2 * r, pads.size());
    }
    return pads;
  }
  const size_t n = axes->size();
  if (pads.size() != 2 * n) {
    return ctx.errorf("expected {} pads (twice the {} axes), got {}", 2 * n, n, pads.size());
  }
  std::vector<int64_t> all(2 * static_cast<size_t>(r), 0);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = (*axes)[i];
    if (a < -r || a >= r) {
      return ctx.errorf("axes [{}] are out of range for {}", fmt::join(*axes, ","), in.to_string());
    }
    const auto d = static_cast<size_t>(a < 0 ? a + r : a);
    if (seen[d]) return ctx.errorf("axes [{}] repeat an axis", fmt::join(*axes, ","));
    seen[d] = true;
    all[d] = pads[i];
    all[d + static_cast<size_t>(r)] = pads[i + n];
  }
  return all;
}

}  // namespace

template <>
InferResult infer_op(const ops::Pad& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "pads", 1));
  const TensorType& in = ctx.input(0);
  if (op.mode != "constant" && op.mode != "reflect" && op.mode != "edge" && op.mode != "wrap") {
    return ctx.errorf("expected mode constant, reflect, edge or wrap, got \"{}\"", op.mode);
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2));
    const TensorType& cv = ctx.input(2);
    if (cv.dtype != in.dtype) {
      return ctx.errorf("expected constant_value to be {} like the data, got {}",
                        dtype_name(in.dtype), cv.to_string());
    }
    if (cv.has_rank() && cv.rank() > 1) {
      return ctx.errorf("expected a scalar constant_value, got {}", cv.to_string());
    }
  }
  if (ctx.has_input(3)) KILN_RETURN_IF_ERROR(require_axes(ctx, 3));
  if (!in.has_rank()) return one(in);
  std::optional<std::vector<int64_t>> given = known_ints(ctx, 1);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) {
    axes = known_ints(ctx, 3);
    if (!axes) return one(unknown_dims(in.dtype, in.rank()));
  }
  if (!given) return one(unknown_dims(in.dtype, in.rank()));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, pads_of_all_axes(ctx, *given, axes, in));
  const int r = in.rank();
  std::vector<Dim> out = *in.dims;
  for (int i = 0; i < r; ++i) {
    Dim& d = out[static_cast<size_t>(i)];
    if (!d.known()) continue;
    const int64_t before = pads[static_cast<size_t>(i)], after = pads[static_cast<size_t>(i + r)];
    int64_t size = 0;
    if (__builtin_add_overflow(d.value, before, &size) ||
        __builtin_add_overflow(size, after, &size)) {
      return ctx.errorf("pads [{}] overflow axis {} of {}", fmt::join(pads, ","), i,
                        in.to_string());
    }
    if (size < 0)
      return ctx.errorf("pads [{}] crop axis {} of {} below zero", fmt::join(pads, ","), i,
                        in.to_string());
    if (op.mode != "constant" && d.value == 0 && size > 0) {
      return ctx.errorf("{} padding of the empty axis {} of {} is not possible", op.mode, i,
                        in.to_string());
    }
    d = Dim(size);
  }
  return one(TensorType(in.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Shape& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return one(unknown_dims(DType::kI64, 1));
  auto [start, end] = shape_range(op, in.rank());
  return one(TensorType(DType::kI64, {Dim(end - start)}));
}

template <>
InferResult infer_op(const ops::Size&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  return one(TensorType(DType::kI64, std::vector<Dim>{}));
}

template <>
InferResult infer_op(const ops::DepthToSpace& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 4));
  const TensorType& in = ctx.input(0);
  if (!op.blocksize || *op.blocksize <= 0) return ctx.error("expected a blocksize attribute > 0");
  if (op.mode != "DCR" && op.mode != "CRD")
    return ctx.errorf("expected mode DCR or CRD, got \"{}\"", op.mode);
  if (!in.has_rank()) return one(unknown_dims(in.dtype, 4));
  const int64_t b = *op.blocksize;
  KILN_ASSIGN_OR_RETURN(const int64_t bb, checked_mul(ctx, b, b));
  std::vector<Dim> d = *in.dims;
  if (d[1].known() && d[1].value % bb != 0) {
    return ctx.errorf("expected the channels of {} to be a multiple of blocksize^2 = {}",
                      in.to_string(), bb);
  }
  KILN_ASSIGN_OR_RETURN(Dim h, mul_dim(ctx, d[2], b));
  KILN_ASSIGN_OR_RETURN(Dim w, mul_dim(ctx, d[3], b));
  return one(TensorType(in.dtype, {d[0], d[1].known() ? Dim(d[1].value / bb) : Dim(), h, w}));
}

template <>
InferResult infer_op(const ops::SpaceToDepth& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 4));
  const TensorType& in = ctx.input(0);
  if (!op.blocksize || *op.blocksize <= 0) return ctx.error("expected a blocksize attribute > 0");
  if (op.mode != "DCR" && op.mode != "CRD")
    return ctx.errorf("expected mode DCR or CRD, got \"{}\"", op.mode);
  if (!in.has_rank()) return one(unknown_dims(in.dtype, 4));
  const int64_t b = *op.blocksize;
  std::vector<Dim> d = *in.dims;
  for (int i = 2; i < 4; ++i) {
    if (d[static_cast<size_t>(i)].known() && d[static_cast<size_t>(i)].value % b != 0) {
      return ctx.errorf("expected the spatial dims of {} to be multiples of blocksize {}",
                        in.to_string(), b);
    }
  }
  auto div = [](const Dim& x, int64_t k) { return x.known() ? Dim(x.value / k) : Dim(); };
  KILN_ASSIGN_OR_RETURN(const int64_t bb, checked_mul(ctx, b, b));
  KILN_ASSIGN_OR_RETURN(Dim c, mul_dim(ctx, d[1], bb));
  return one(TensorType(in.dtype, {d[0], c, div(d[2], b), div(d[3], b)}));
}

template <>
InferResult infer_op(const ops::Constant& op, const InferContext& ctx) {
  Result<Tensor> value = constant_tensor(op);
  if (!value.ok()) return ctx.error(value.status().message());
  return one(TensorType(value->dtype(), value->shape()));
}

template <>
InferResult infer_op(const ops::ConstantOfShape& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_ints(ctx, 0, "shape", 1));
  DType dtype = DType::kF32;
  if (op.value.defined()) {
    if (op.value.numel() != 1) {
      return ctx.errorf("expected a one-element value, got {} elements", op.value.numel());
    }
    dtype = op.value.dtype();
  }
  std::optional<std::vector<int64_t>> shape = known_ints(ctx, 0);
  if (!shape) {
    const TensorType& st = ctx.input(0);
    if (st.has_rank() && (*st.dims)[0].known()) {
      return one(unknown_dims(dtype, static_cast<int>((*st.dims)[0].value)));
    }
    return one(TensorType::unranked(dtype));
  }
  std::vector<Dim> out;
  for (int64_t s : *shape) {
    if (s < 0) return ctx.errorf("expected shape values >= 0, got [{}]", fmt::join(*shape, ","));
    out.emplace_back(s);
  }
  return one(TensorType(dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Range&, const InferContext& ctx) {
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const DType dtype = ctx.input(0).dtype;
  if (!dtype_is_float(dtype) && dtype != DType::kI16 && dtype != DType::kI32 &&
      dtype != DType::kI64) {
    return ctx.errorf("expected f16, bf16, f32, f64, i16, i32 or i64 inputs, got {}",
                      ctx.input(0).to_string());
  }
  for (int i = 0; i < 3; ++i) {
    const TensorType& t = ctx.input(i);
    if (t.dtype != dtype)
      return ctx.errorf("expected every input to be {}, input {} is {}", dtype_name(dtype), i,
                        t.to_string());
    // A 1-D input of unknown size is checked at run time (range_count wants one element).
    if (t.has_rank() && !(t.rank() == 0 || (t.rank() == 1 && !(*t.dims)[0].known()) ||
                          (t.rank() == 1 && (*t.dims)[0] == Dim(1)))) {
      return ctx.errorf("expected scalar inputs, input {} is {}", i, t.to_string());
    }
  }
  if (!ctx.input_value(0) || !ctx.input_value(1) || !ctx.input_value(2)) {
    return one(unknown_dims(dtype, 1));
  }
  KILN_ASSIGN_OR_RETURN(int64_t n, named(ctx, range_count(*ctx.input_value(0), *ctx.input_value(1),
                                                          *ctx.input_value(2))));
  return one(TensorType(dtype, {Dim(n)}));
}

template <>
InferResult infer_op(const ops::EyeLike& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 2));
  TensorType out = ctx.input(0);
  if (out.dtype == DType::kString)
    return ctx.error("expected a numeric input, got a string tensor");
  if (op.dtype) {
    if (*op.dtype == DType::kString) return ctx.error("expected a numeric dtype, got string");
    out.dtype = *op.dtype;
  }
  if (!out.has_rank()) out = unknown_dims(out.dtype, 2);
  return one(std::move(out));
}

template <>
InferResult infer_op(const ops::CenterCropPad& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_ints(ctx, 1, "shape", 1));
  const TensorType& in = ctx.input(0);
  if (!in.has_rank()) return one(TensorType::unranked(in.dtype));
  const int rank = in.rank();
  std::vector<int> axes;
  if (op.axes) {
    for (int64_t a : *op.axes) {
      KILN_ASSIGN_OR_RETURN(int d, axis_in(ctx, a, rank, "axes"));
      if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
        return ctx.errorf("expected distinct axes, got axis {} twice", d);
      }
      axes.push_back(d);
    }
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<Dim> dims = *in.dims;
  std::optional<std::vector<int64_t>> shape = known_ints(ctx, 1);
  if (shape && shape->size() != axes.size()) {
    return ctx.errorf("expected {} target sizes (one per axis), got {}", axes.size(), shape->size());
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (shape && (*shape)[i] < 0) return ctx.errorf("expected sizes >= 0, got {}", (*shape)[i]);
    dims[static_cast<size_t>(axes[i])] = shape ? Dim((*shape)[i]) : Dim();
  }
  return one(TensorType(in.dtype, std::move(dims)));
}

template <>
InferResult infer_op(const ops::Trilu&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (in.has_rank() && in.rank() < 2)
    return ctx.errorf("expected an input of rank >= 2, got {}", in.to_string());
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(1));
    const TensorType& k = ctx.input(1);
    if (k.dtype != DType::kI64 || (k.has_rank() && k.rank() > 1)) {
      return ctx.errorf("expected k to be an i64 scalar, got {}", k.to_string());
    }
  }
  return one(in);
}

}  // namespace kiln::compiler
