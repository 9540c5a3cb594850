// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the indexing op family.
#include "compiler/ops/indexing.h"

#include <fmt/ranges.h>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

std::vector<ValueType> one(TensorType t) {
  return {ValueType(std::move(t))};
}

Status require_indices(const InferContext& ctx, int i, std::string_view what) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const DType d = ctx.input(i).dtype;
  if (d != DType::kI32 && d != DType::kI64) {
    return ctx.errorf("expected {} (input {}) to be i32 or i64, got {}", what, i,
                      ctx.input(i).to_string());
  }
  return Status();
}

Result<int> axis_in(const InferContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.errorf("expected axis in [{}, {}], got {}", -rank, rank - 1, axis);
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Fails when two dims are known and differ.
Status require_same_dims(const InferContext& ctx, const TensorType& a, const TensorType& b,
                         std::string_view what) {
  if (!a.has_rank() || !b.has_rank()) return Status();
  bool same = a.rank() == b.rank();
  for (int i = 0; same && i < a.rank(); ++i) {
    const Dim& x = (*a.dims)[static_cast<size_t>(i)];
    const Dim& y = (*b.dims)[static_cast<size_t>(i)];
    same = !x.known() || !y.known() || x.value == y.value;
  }
  if (!same) return ctx.errorf("expected {}, got {} and {}", what, a.to_string(), b.to_string());
  return Status();
}

// ScatterElements/Scatter: data, indices and updates of one rank; indices and updates alike.
InferResult infer_scatter(const InferContext& ctx, int64_t axis, std::string_view reduction) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_indices(ctx, 1, "indices"));
  KILN_RETURN_IF_ERROR(ctx.require_input(2));
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    return ctx.errorf("expected reduction none, add, mul, max or min, got \"{}\"", reduction);
  }
  const TensorType& data = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  const TensorType& updates = ctx.input(2);
  if (updates.dtype != data.dtype) {
    return ctx.errorf("expected updates of the data's type {}, got {}", dtype_name(data.dtype),
                      updates.to_string());
  }
  KILN_RETURN_IF_ERROR(
      require_same_dims(ctx, indices, updates, "indices and updates of one shape"));
  if (data.has_rank()) {
    KILN_RETURN_IF_ERROR(axis_in(ctx, axis, data.rank()).status());
    if (indices.has_rank() && indices.rank() != data.rank()) {
      return ctx.errorf("expected indices of the data's rank {}, got {}", data.rank(),
                        indices.to_string());
    }
  }
  return one(data);
}

}  // namespace

template <>
InferResult infer_op(const ops::Gather& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_indices(ctx, 1, "indices"));
  const TensorType& data = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  if (!data.has_rank()) return one(TensorType::unranked(data.dtype));
  if (data.rank() < 1) return ctx.errorf("expected data of rank >= 1, got {}", data.to_string());
  KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, op.axis, data.rank()));
  if (!indices.has_rank()) return one(TensorType::unranked(data.dtype));
  std::vector<Dim> out(data.dims->begin(), data.dims->begin() + axis);
  out.insert(out.end(), indices.dims->begin(), indices.dims->end());
  out.insert(out.end(), data.dims->begin() + axis + 1, data.dims->end());
  return one(TensorType(data.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::GatherElements& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_indices(ctx, 1, "indices"));
  const TensorType& data = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  if (data.has_rank()) {
    if (data.rank() < 1) return ctx.errorf("expected data of rank >= 1, got {}", data.to_string());
    KILN_RETURN_IF_ERROR(axis_in(ctx, op.axis, data.rank()).status());
    if (indices.has_rank() && indices.rank() != data.rank()) {
      return ctx.errorf("expected indices of the data's rank {}, got {}", data.rank(),
                        indices.to_string());
    }
  }
  TensorType out = indices;
  out.dtype = data.dtype;
  return one(std::move(out));
}

template <>
InferResult infer_op(const ops::GatherND& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_indices(ctx, 1, "indices"));
  const TensorType& data = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  if (!data.has_rank() || !indices.has_rank()) return one(TensorType::unranked(data.dtype));
  const int r = data.rank(), q = indices.rank();
  const int64_t b = op.batch_dims;
  if (q < 1 || r < 1)
    return ctx.errorf("expected data and indices of rank >= 1, got {} and {}", data.to_string(),
                      indices.to_string());
  if (b < 0 || b >= std::min(q, r)) {
    return ctx.errorf("expected batch_dims in [0, {}), got {}", std::min(q, r), b);
  }
  for (int64_t i = 0; i < b; ++i) {
    const Dim& x = (*data.dims)[static_cast<size_t>(i)];
    const Dim& y = (*indices.dims)[static_cast<size_t>(i)];
    if (x.known() && y.known() && x.value != y.value) {
      return ctx.errorf("expected the first {} dims of data {} and indices {} to match", b,
                        data.to_string(), indices.to_string());
    }
  }
  const Dim k = (*indices.dims)[static_cast<size_t>(q - 1)];
  if (!k.known()) return one(TensorType::unranked(data.dtype));
  if (k.value < 1 || k.value > r - b) {
    return ctx.errorf("expected the last dim of indices {} in [1, {}], got {}", indices.to_string(),
                      r - b, k.value);
  }
  std::vector<Dim> out(indices.dims->begin(), indices.dims->end() - 1);
  out.insert(out.end(), data.dims->begin() + b + k.value, data.dims->end());
  return one(TensorType(data.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Scatter& op, const InferContext& ctx) {
  return infer_scatter(ctx, op.axis, "none");
}

template <>
InferResult infer_op(const ops::ScatterElements& op, const InferContext& ctx) {
  return infer_scatter(ctx, op.axis, op.reduction);
}

template <>
InferResult infer_op(const ops::ScatterND& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(require_indices(ctx, 1, "indices"));
  KILN_RETURN_IF_ERROR(ctx.require_input(2));
  const std::string& red = op.reduction;
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min") {
    return ctx.errorf("expected reduction none, add, mul, max or min, got \"{}\"", red);
  }
  const TensorType& data = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  const TensorType& updates = ctx.input(2);
  if (updates.dtype != data.dtype) {
    return ctx.errorf("expected updates of the data's type {}, got {}", dtype_name(data.dtype),
                      updates.to_string());
  }
  if (data.has_rank() && indices.has_rank()) {
    const int q = indices.rank();
    if (q < 1) return ctx.errorf("expected indices of rank >= 1, got {}", indices.to_string());
    const Dim k = (*indices.dims)[static_cast<size_t>(q - 1)];
    if (k.known()) {
      if (k.value > data.rank()) {
        return ctx.errorf("expected the last dim of indices {} <= the data's rank {}",
                          indices.to_string(), data.rank());
      }
      std::vector<Dim> expect(indices.dims->begin(), indices.dims->end() - 1);
      expect.insert(expect.end(), data.dims->begin() + k.value, data.dims->end());
      const TensorType want(updates.dtype, std::move(expect));
      if (!require_same_dims(ctx, want, updates, "").ok()) {
        return ctx.errorf("expected updates {} (indices[:-1] + data[k:]), got {}", want.to_string(),
                          updates.to_string());
      }
    }
  }
  return one(data);
}

template <>
InferResult infer_op(const ops::OneHot& op, const InferContext& ctx) {
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const TensorType& indices = ctx.input(0);
  const TensorType& depth = ctx.input(1);
  const TensorType& values = ctx.input(2);
  for (const TensorType* t : {&indices, &depth}) {
    if (t->dtype == DType::kString || t->dtype == DType::kBool) {
      return ctx.errorf("expected numeric indices and depth, got {}", t->to_string());
    }
  }
  if (depth.has_rank() && depth.is_static() && depth.shape().numel() != 1) {
    return ctx.errorf("expected a one-element depth, got {}", depth.to_string());
  }
  if (values.has_rank() && values.is_static() && values.shape().numel() != 2) {
    return ctx.errorf("expected two values (off, on), got {}", values.to_string());
  }
  if (!indices.has_rank()) return one(TensorType::unranked(values.dtype));
  const int r = indices.rank() + 1;
  if (op.axis < -r || op.axis >= r)
    return ctx.errorf("expected axis in [{}, {}], got {}", -r, r - 1, op.axis);
  const auto axis = static_cast<size_t>(op.axis < 0 ? op.axis + r : op.axis);
  Dim d;
  if (const Tensor* t = ctx.input_value(1); t != nullptr && t->numel() == 1) {
    const double v = tensor_to_doubles(*t)[0];
    if (!(v >= 0) || v > 1e15) return ctx.errorf("expected depth >= 0, got {}", v);
    d = Dim(static_cast<int64_t>(v));
  }
  std::vector<Dim> out = *indices.dims;
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), d);
  return one(TensorType(values.dtype, std::move(out)));
}

template <>
InferResult infer_op(const ops::Compress& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 1));
  const TensorType& in = ctx.input(0);
  if (ctx.input(1).dtype != DType::kBool) {
    return ctx.errorf("expected a bool condition, got {}", ctx.input(1).to_string());
  }
  // The condition selects among the first n slices (elements without an axis).
  Dim n;
  std::optional<int> axis;
  if (op.axis && in.has_rank()) {
    KILN_ASSIGN_OR_RETURN(axis, axis_in(ctx, *op.axis, in.rank()));
    n = (*in.dims)[static_cast<size_t>(*axis)];
  } else if (!op.axis && in.is_static()) {
    n = Dim(in.shape().numel());
  }
  Dim count;
  if (const Tensor* cond = ctx.input_value(1)) {
    int64_t selected = 0;
    for (int64_t i = 0; i < cond->numel(); ++i) {
      if (!cond->data<bool>()[i]) continue;
      if (n.known() && i >= n.value) {
        return ctx.errorf("condition selects index {}, past the {} slices of {}", i, n.value,
                          in.to_string());
      }
      ++selected;
    }
    count = Dim(selected);
  }
  if (!op.axis) return one(TensorType(in.dtype, {count}));
  if (!in.has_rank()) return one(in);
  TensorType out = in;
  (*out.dims)[static_cast<size_t>(*axis)] = count;
  return one(std::move(out));
}

template <>
InferResult infer_op(const ops::NonZero&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  if (in.dtype == DType::kString) return ctx.error("expected a numeric input, got a string tensor");
  Dim count;
  if (const Tensor* t = ctx.input_value(0)) {
    int64_t n = 0;
    visit_dtype(t->dtype(), [&]<class T>() {
      if constexpr (!std::is_same_v<T, std::string>) {
        for (int64_t i = 0; i < t->numel(); ++i)
          n += static_cast<float>(t->data<T>()[i]) != 0.0f ? 1 : 0;
      }
    });
    count = Dim(n);
  }
  return one(TensorType(DType::kI64, {in.has_rank() ? Dim(in.rank()) : Dim(), count}));
}

template <>
InferResult infer_op(const ops::Unique& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& in = ctx.input(0);
  TensorType y = TensorType(in.dtype, {Dim()});
  Dim inverse;
  if (!op.axis) {
    if (in.is_static()) inverse = Dim(in.shape().numel());
  } else if (in.has_rank()) {
    KILN_ASSIGN_OR_RETURN(int axis, axis_in(ctx, *op.axis, in.rank()));
    y = in;
    (*y.dims)[static_cast<size_t>(axis)] = Dim();
    inverse = (*in.dims)[static_cast<size_t>(axis)];
  } else {
    y = in;
  }
  std::vector<ValueType> out = {y, TensorType(DType::kI64, {Dim()}),
                                TensorType(DType::kI64, {inverse}),
                                TensorType(DType::kI64, {Dim()})};
  if (ctx.num_outputs() > 4)
    return ctx.errorf("expected at most 4 outputs, got {}", ctx.num_outputs());
  out.resize(static_cast<size_t>(ctx.num_outputs()));
  return out;
}

template <>
InferResult infer_op(const ops::ReverseSequence& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1, 1));
  const TensorType& in = ctx.input(0);
  if (ctx.input(1).dtype != DType::kI64) {
    return ctx.errorf("expected i64 sequence_lens, got {}", ctx.input(1).to_string());
  }
  if ((op.batch_axis != 0 && op.batch_axis != 1) || (op.time_axis != 0 && op.time_axis != 1) ||
      op.batch_axis == op.time_axis) {
    return ctx.errorf(
        "expected batch_axis and time_axis to be 0 and 1 in some order, got {} and {}",
        op.batch_axis, op.time_axis);
  }
  if (in.has_rank()) {
    if (in.rank() < 2) return ctx.errorf("expected an input of rank >= 2, got {}", in.to_string());
    const Dim& batch = (*in.dims)[static_cast<size_t>(op.batch_axis)];
    const Dim lens = ctx.input(1).has_rank() ? (*ctx.input(1).dims)[0] : Dim();
    if (batch.known() && lens.known() && batch.value != lens.value) {
      return ctx.errorf("expected {} sequence_lens (the batch size of {}), got {}", batch.value,
                        in.to_string(), lens.value);
    }
  }
  return one(in);
}

}  // namespace kiln::compiler
