// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the nn op family: convolutions and pooling (nn_norm.cc: the rest).
#include "compiler/ops/nn.h"

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
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

// Input i is present, a tensor, and of a float type (or i8/u8 when allowed).
Status check_float_input(const InferContext& ctx, int i, bool allow_int8 = false) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  DType d = ctx.input(i).dtype;
  bool ok = dtype_is_float(d) || (allow_int8 && (d == DType::kI8 || d == DType::kU8));
  if (!ok) {
    return ctx.errorf("input {} must be {}, got {}", i,
                      allow_int8 ? "a float type, i8 or u8" : "a float type (f16, bf16, f32, f64)",
                      dtype_name(d));
  }
  return Status();
}

// Input 0 is an N x C x D1 x ... tensor (checked when the rank is known).
Status check_image_input(const InferContext& ctx, int min_rank = 3) {
  const TensorType& x = ctx.input(0);
  if (x.has_rank() && x.rank() < min_rank) {
    return ctx.errorf("input 0 must have rank >= {} (N x C x D1 x ...), got {}", min_rank,
                      x.to_string());
  }
  return Status();
}

std::vector<int64_t> dim_values(const TensorType& t, int begin) {
  std::vector<int64_t> out;
  for (auto i = static_cast<size_t>(begin); i < t.dims->size(); ++i) {
    out.push_back((*t.dims)[i].value);
  }
  return out;
}

Dim to_dim(int64_t v) {
  return v < 0 ? Dim() : Dim(v);
}

// [N, channels, out...] with N taken from input 0.
TensorType image_output(const TensorType& x, Dim channels, const std::vector<int64_t>& out) {
  std::vector<Dim> dims{(*x.dims)[0], std::move(channels)};
  for (int64_t v : out) dims.push_back(to_dim(v));
  return TensorType(x.dtype, std::move(dims));
}

Status wrap(const InferContext& ctx, const Status& s) {
  return s.ok() ? s : ctx.error(s.message());
}

// Conv and ConvTranspose: checks the shared input contract and returns the kernel's spatial
// dims (from kernel_shape or the weights; nullopt when neither is known).
Result<std::optional<std::vector<int64_t>>> conv_kernel(
    const InferContext& ctx, const std::optional<std::vector<int64_t>>& kernel_shape,
    int64_t group) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_image_input(ctx));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (w.dtype != x.dtype) {
    return ctx.errorf("the weights must have the input's element type {}, got {}",
                      dtype_name(x.dtype), dtype_name(w.dtype));
  }
  if (group < 1) return ctx.errorf("expected group >= 1, got {}", group);
  if (w.has_rank() && w.rank() < 3) {
    return ctx.errorf("the weights must have rank >= 3, got {}", w.to_string());
  }
  if (x.has_rank() && w.has_rank() && w.rank() != x.rank()) {
    return ctx.errorf("the weights must have the input's rank {}, got {}", x.rank(), w.to_string());
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    if (ctx.input(2).dtype != x.dtype) {
      return ctx.errorf("the bias must have the input's element type {}, got {}",
                        dtype_name(x.dtype), dtype_name(ctx.input(2).dtype));
    }
  }
  const int rank = x.has_rank() ? x.rank() : w.rank();
  if (kernel_shape) {
    if (rank >= 0 && static_cast<int>(kernel_shape->size()) != rank - 2) {
      return ctx.errorf("expected kernel_shape with {} values, got {}", rank - 2,
                        ints_string(*kernel_shape));
    }
    if (w.has_rank()) {
      for (size_t i = 0; i < kernel_shape->size(); ++i) {
        const Dim& d = (*w.dims)[i + 2];
        if (d.known() && d.value != (*kernel_shape)[i]) {
          return ctx.errorf("kernel_shape {} does not match the weights {}",
                            ints_string(*kernel_shape), w.to_string());
        }
      }
    }
    return std::optional<std::vector<int64_t>>(*kernel_shape);
  }
  if (!w.has_rank()) return std::optional<std::vector<int64_t>>();
  std::vector<int64_t> k = dim_values(w, 2);
  for (int64_t v : k) {
    if (v < 0) return std::optional<std::vector<int64_t>>();
  }
  return std::optional<std::vector<int64_t>>(std::move(k));
}

// Checks that `a` equals `b` where both are known.
Status check_dim(const InferContext& ctx, const Dim& a, int64_t b, std::string_view what) {
  if (a.known() && b >= 0 && a.value != b)
    return ctx.errorf("{}: expected {}, got {}", what, b, a.value);
  return Status();
}

// The optional bias (input 2) has `channels` values.
Status check_bias(const InferContext& ctx, const Dim& channels) {
  if (!ctx.has_input(2) || !ctx.input(2).has_rank()) return Status();
  return check_dim(ctx, (*ctx.input(2).dims)[0], channels.value, "bias size");
}

// The shared path of the windowed pooling ops.
InferResult pool_types(const InferContext& ctx, const std::optional<std::vector<int64_t>>& kernel,
                       const WindowAttrs& attrs, bool allow_int8, int num_outputs) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0, allow_int8));
  KILN_RETURN_IF_ERROR(check_image_input(ctx));
  if (!kernel) return ctx.error("the kernel_shape attribute is required");
  const TensorType& x = ctx.input(0);
  if (!x.has_rank()) {
    std::vector<ValueType> out{TensorType::unranked(x.dtype)};
    if (num_outputs > 1) out.emplace_back(TensorType::unranked(DType::kI64));
    return out;
  }
  if (static_cast<int>(kernel->size()) != x.rank() - 2) {
    return ctx.errorf("expected kernel_shape with {} values for input {}, got {}", x.rank() - 2,
                      x.to_string(), ints_string(*kernel));
  }
  auto g = forward_window(dim_values(x, 2), *kernel, attrs);
  if (!g.ok()) return wrap(ctx, g.status());
  TensorType y = image_output(x, (*x.dims)[1], g->out);
  std::vector<ValueType> out{y};
  if (num_outputs > 1) {
    y.dtype = DType::kI64;
    out.emplace_back(y);
  }
  return out;
}

InferResult global_pool_types(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_image_input(ctx, 2));
  const TensorType& x = ctx.input(0);
  if (!x.has_rank()) return std::vector<ValueType>{x};
  return std::vector<ValueType>{
      image_output(x, (*x.dims)[1], std::vector<int64_t>(static_cast<size_t>(x.rank() - 2), 1))};
}

}  // namespace

template <>
InferResult infer_op(const ops::Conv& op, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto kernel, conv_kernel(ctx, op.kernel_shape, op.group));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  Dim m = w.has_rank() ? (*w.dims)[0] : Dim();
  if (m.known() && m.value % op.group != 0) {
    return ctx.errorf("the output channels {} are not a multiple of group {}", m.value, op.group);
  }
  if (x.has_rank() && w.has_rank() && (*w.dims)[1].known()) {
    KILN_RETURN_IF_ERROR(check_dim(ctx, (*x.dims)[1], (*w.dims)[1].value * op.group,
                                   "the input channels must be the weights' dim 1 times group"));
  }
  KILN_RETURN_IF_ERROR(check_bias(ctx, m));
  if (!x.has_rank()) return std::vector<ValueType>{unknown_dims(x.dtype, w.rank())};
  std::vector<int64_t> in = dim_values(x, 2);
  if (!kernel) {
    return std::vector<ValueType>{image_output(x, m, std::vector<int64_t>(in.size(), -1))};
  }
  auto g = forward_window(in, *kernel, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok()) return wrap(ctx, g.status());
  return std::vector<ValueType>{image_output(x, m, g->out)};
}

template <>
InferResult infer_op(const ops::ConvTranspose& op, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto kernel, conv_kernel(ctx, op.kernel_shape, op.group));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  Dim m;
  if (w.has_rank()) {
    const Dim& c = (*w.dims)[0];
    if (c.known() && c.value % op.group != 0) {
      return ctx.errorf("the input channels {} are not a multiple of group {}", c.value, op.group);
    }
    if (x.has_rank()) {
      KILN_RETURN_IF_ERROR(
          check_dim(ctx, (*x.dims)[1], c.value, "input channels (the weights' dim 0)"));
    }
    if ((*w.dims)[1].known()) m = Dim((*w.dims)[1].value * op.group);
  }
  KILN_RETURN_IF_ERROR(check_bias(ctx, m));
  if (!x.has_rank()) return std::vector<ValueType>{unknown_dims(x.dtype, w.rank())};
  std::vector<int64_t> in = dim_values(x, 2);
  if (!kernel) {
    return std::vector<ValueType>{image_output(x, m, std::vector<int64_t>(in.size(), -1))};
  }
  auto g = transpose_window(in, *kernel, {op.auto_pad, op.strides, op.dilations, op.pads},
                            op.output_padding, op.output_shape);
  if (!g.ok()) return wrap(ctx, g.status());
  return std::vector<ValueType>{image_output(x, m, g->out)};
}

template <>
InferResult infer_op(const ops::AveragePool& op, const InferContext& ctx) {
  if (op.count_include_pad != 0 && op.count_include_pad != 1) {
    return ctx.errorf("expected count_include_pad 0 or 1, got {}", op.count_include_pad);
  }
  return pool_types(ctx, op.kernel_shape,
                    {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0}, false, 1);
}

template <>
InferResult infer_op(const ops::MaxPool& op, const InferContext& ctx) {
  if (op.storage_order != 0 && op.storage_order != 1) {
    return ctx.errorf("expected storage_order 0 or 1, got {}", op.storage_order);
  }
  return pool_types(ctx, op.kernel_shape,
                    {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0}, true,
                    ctx.num_outputs());
}

template <>
InferResult infer_op(const ops::LpPool& op, const InferContext& ctx) {
  if (op.p < 1) return ctx.errorf("expected p >= 1, got {}", op.p);
  return pool_types(ctx, op.kernel_shape,
                    {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0}, false, 1);
}

template <>
InferResult infer_op(const ops::GlobalAveragePool& /*op*/, const InferContext& ctx) {
  return global_pool_types(ctx);
}

template <>
InferResult infer_op(const ops::GlobalMaxPool& /*op*/, const InferContext& ctx) {
  return global_pool_types(ctx);
}

template <>
InferResult infer_op(const ops::GlobalLpPool& op, const InferContext& ctx) {
  if (op.p < 1) return ctx.errorf("expected p >= 1, got {}", op.p);
  return global_pool_types(ctx);
}

template <>
InferResult infer_op(const ops::MaxUnpool& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 3));
  KILN_RETURN_IF_ERROR(check_float_input(ctx, 0));
  KILN_RETURN_IF_ERROR(check_image_input(ctx));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  if (!op.kernel_shape) return ctx.error("the kernel_shape attribute is required");
  const TensorType& x = ctx.input(0);
  const TensorType& indices = ctx.input(1);
  if (indices.dtype != DType::kI64) {
    return ctx.errorf("the indices (input 1) must be i64, got {}", dtype_name(indices.dtype));
  }
  if (x.has_rank() && indices.has_rank()) {
    bool same = x.rank() == indices.rank();
    for (int i = 0; same && i < x.rank(); ++i) {
      const Dim& a = (*x.dims)[static_cast<size_t>(i)];
      const Dim& b = (*indices.dims)[static_cast<size_t>(i)];
      same = !a.known() || !b.known() || a.value == b.value;
    }
    if (!same) {
      return ctx.errorf("the indices must have the input's shape {}, got {}", x.to_string(),
                        indices.to_string());
    }
  }
  const int rank = x.has_rank() ? x.rank() : -1;
  if (rank >= 0 && static_cast<int>(op.kernel_shape->size()) != rank - 2) {
    return ctx.errorf("expected kernel_shape with {} values for input {}, got {}", rank - 2,
                      x.to_string(), ints_string(*op.kernel_shape));
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    if (ctx.input(2).dtype != DType::kI64) {
      return ctx.errorf("output_shape (input 2) must be i64, got {}",
                        dtype_name(ctx.input(2).dtype));
    }
    std::optional<std::vector<int64_t>> shape = known_ints(ctx, 2);
    if (!shape) return std::vector<ValueType>{unknown_dims(x.dtype, rank)};
    if (rank >= 0 && static_cast<int>(shape->size()) != rank) {
      return ctx.errorf("expected output_shape with {} values, got {}", rank, ints_string(*shape));
    }
    std::vector<Dim> dims;
    for (int64_t v : *shape) {
      if (v < 0)
        return ctx.errorf("expected a non-negative output_shape, got {}", ints_string(*shape));
      dims.emplace_back(v);
    }
    if (rank >= 0) {
      KILN_RETURN_IF_ERROR(check_dim(ctx, (*x.dims)[0], dims[0].value, "output_shape batch size"));
      KILN_RETURN_IF_ERROR(check_dim(ctx, (*x.dims)[1], dims[1].value, "output_shape channels"));
    }
    return std::vector<ValueType>{TensorType(x.dtype, std::move(dims))};
  }
  if (rank < 0) return std::vector<ValueType>{x};
  // Validates the window; unknown input sizes leave the output sizes to compute here.
  static const std::string kNotSet = "NOTSET";
  const size_t n = op.kernel_shape->size();
  auto g = forward_window(std::vector<int64_t>(n, -1), *op.kernel_shape,
                          {kNotSet, op.strides, std::nullopt, op.pads});
  if (!g.ok()) return wrap(ctx, g.status());
  std::vector<int64_t> out;
  for (size_t a = 0; a < n; ++a) {
    int64_t in = (*x.dims)[a + 2].value;
    int64_t o = (in - 1) * g->strides[a] + g->kernel[a] - g->pad_begin[a] - g->pad_end[a];
    if (in >= 0 && o < 0) {
      return ctx.errorf("the pads {} leave an empty output", ints_string(*op.pads));
    }
    out.push_back(in < 0 ? -1 : o);
  }
  return std::vector<ValueType>{image_output(x, (*x.dims)[1], out)};
}

}  // namespace kiln::compiler
