// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the signal op family.
#include "compiler/ops/signal.h"

#include <optional>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

// Checks that input i is a one-element integer tensor (a scalar, or shape [1]) and returns its
// value when known.
Result<std::optional<int64_t>> scalar_int_input(const InferContext& ctx, int i,
                                                std::string_view what) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const TensorType& t = ctx.input(i);
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64) {
    return ctx.errorf("{} must be i32 or i64, got {}", what, t.to_string());
  }
  if (t.is_static() && t.shape().numel() != 1) {
    return ctx.errorf("{} must be a scalar, got {}", what, t.to_string());
  }
  std::optional<std::vector<int64_t>> v = known_ints(ctx, i);
  if (!v) return std::optional<int64_t>();
  if (v->size() != 1) return ctx.errorf("{} must be a scalar, got {} values", what, v->size());
  return std::optional<int64_t>(v->front());
}

// Checks that input i is a one-element float tensor.
Status scalar_float_input(const InferContext& ctx, int i, std::string_view what) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const TensorType& t = ctx.input(i);
  if (!dtype_is_float(t.dtype))
    return ctx.errorf("{} must be a float tensor, got {}", what, t.to_string());
  if (t.is_static() && t.shape().numel() != 1) {
    return ctx.errorf("{} must be a scalar, got {}", what, t.to_string());
  }
  return Status();
}

Status check_output_datatype(const InferContext& ctx, DType dtype) {
  if (dtype == DType::kString || dtype == DType::kBool) {
    return ctx.errorf("output_datatype must be numeric, got {}", dtype_name(dtype));
  }
  return Status();
}

InferResult infer_window(const InferContext& ctx, DType output_datatype) {
  KILN_RETURN_IF_ERROR(check_output_datatype(ctx, output_datatype));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> size, scalar_int_input(ctx, 0, "size"));
  if (size && *size < 0) return ctx.errorf("size must be >= 0, got {}", *size);
  Dim d = size ? Dim(*size) : Dim();
  return std::vector<ValueType>{TensorType(output_datatype, {d})};
}

}  // namespace

template <>
InferResult infer_op(const ops::DFT& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (!dtype_is_float(x.dtype)) return ctx.errorf("expected a float input, got {}", x.to_string());
  if (!x.has_rank()) return std::vector<ValueType>{TensorType::unranked(x.dtype)};
  const int rank = x.rank();
  if (rank < 3) {
    return ctx.errorf("expected input [batch, signal dims..., 1 or 2] of rank >= 3, got {}",
                      x.to_string());
  }
  const Dim& last = (*x.dims)[static_cast<size_t>(rank - 1)];
  if (last.known() && last.value != 1 && last.value != 2) {
    return ctx.errorf("the last input dim must be 1 (real) or 2 (complex), got {}", x.to_string());
  }
  int64_t axis = op.axis;
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> given, scalar_int_input(ctx, 2, "axis"));
    if (!given) {
      // Which dim changes is known at run time only.
      std::vector<Dim> dims(static_cast<size_t>(rank));
      dims.front() = (*x.dims)[0];
      dims.back() = Dim(op.inverse != 0 && op.onesided != 0 ? 1 : 2);
      return std::vector<ValueType>{TensorType(x.dtype, std::move(dims))};
    }
    axis = *given;
  }
  const int64_t named_axis = axis;
  if (axis < 0) axis += rank;
  if (axis < 1 || axis > rank - 2) {
    return ctx.errorf("axis must name a signal dim in [1, {}], got {}", rank - 2, named_axis);
  }
  if (op.inverse != 0 && op.inverse != 1)
    return ctx.errorf("inverse must be 0 or 1, got {}", op.inverse);
  if (op.onesided != 0 && op.onesided != 1)
    return ctx.errorf("onesided must be 0 or 1, got {}", op.onesided);
  // The inverse of a one-sided spectrum (IRFFT) is real, its length 2 * (bins - 1) by default.
  const bool irfft = op.inverse != 0 && op.onesided != 0;
  Dim n = (*x.dims)[static_cast<size_t>(axis)];
  if (irfft) n = n.known() ? Dim(2 * (n.value - 1)) : Dim();
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> len, scalar_int_input(ctx, 1, "dft_length"));
    if (len && *len < 1) return ctx.errorf("dft_length must be >= 1, got {}", *len);
    n = len ? Dim(*len) : Dim();
  }
  if (n.known() && n.value < 1) return ctx.errorf("expected a DFT length >= 1, got {}", n.value);
  std::vector<Dim> dims = *x.dims;
  if (op.onesided && !irfft) n = n.known() ? Dim(n.value / 2 + 1) : Dim();
  dims[static_cast<size_t>(axis)] = n;
  dims.back() = Dim(irfft ? 1 : 2);
  return std::vector<ValueType>{TensorType(x.dtype, std::move(dims))};
}

template <>
InferResult infer_op(const ops::STFT& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 3));
  const TensorType& signal = ctx.input(0);
  if (!dtype_is_float(signal.dtype)) {
    return ctx.errorf("expected a float signal, got {}", signal.to_string());
  }
  if (op.onesided != 0 && op.onesided != 1)
    return ctx.errorf("onesided must be 0 or 1, got {}", op.onesided);
  Dim batch, length, comps;
  if (signal.has_rank()) {
    batch = (*signal.dims)[0];
    length = (*signal.dims)[1];
    comps = (*signal.dims)[2];
  }
  if (comps.known() && comps.value != 1 && comps.value != 2) {
    return ctx.errorf("the last signal dim must be 1 (real) or 2 (complex), got {}",
                      signal.to_string());
  }
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> step, scalar_int_input(ctx, 1, "frame_step"));
  if (step && *step < 1) return ctx.errorf("frame_step must be >= 1, got {}", *step);
  Dim frame_length;
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    const TensorType& window = ctx.input(2);
    if (window.dtype != signal.dtype) {
      return ctx.errorf("window must have the signal's dtype {}, got {}", dtype_name(signal.dtype),
                        window.to_string());
    }
    if (window.has_rank()) frame_length = (*window.dims)[0];
  }
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> fl, scalar_int_input(ctx, 3, "frame_length"));
    if (fl && frame_length.known() && *fl != frame_length.value) {
      return ctx.errorf("frame_length {} differs from the window length {}", *fl,
                        frame_length.value);
    }
    if (fl) frame_length = Dim(*fl);
  } else if (!ctx.has_input(2)) {
    return ctx.error("expected a window or a frame_length input, got neither");
  }
  if (frame_length.known() && frame_length.value < 1) {
    return ctx.errorf("frame_length must be >= 1, got {}", frame_length.value);
  }
  Dim frames;
  if (length.known() && frame_length.known()) {
    if (frame_length.value > length.value) {
      return ctx.errorf("frame_length {} exceeds the signal length {}", frame_length.value,
                        length.value);
    }
    if (step) frames = Dim((length.value - frame_length.value) / *step + 1);
  }
  Dim bins = frame_length;
  if (op.onesided) bins = frame_length.known() ? Dim(frame_length.value / 2 + 1) : Dim();
  return std::vector<ValueType>{TensorType(signal.dtype, {batch, frames, bins, Dim(2)})};
}

template <>
InferResult infer_op(const ops::BlackmanWindow& op, const InferContext& ctx) {
  return infer_window(ctx, op.output_datatype);
}

template <>
InferResult infer_op(const ops::HammingWindow& op, const InferContext& ctx) {
  return infer_window(ctx, op.output_datatype);
}

template <>
InferResult infer_op(const ops::HannWindow& op, const InferContext& ctx) {
  return infer_window(ctx, op.output_datatype);
}

template <>
InferResult infer_op(const ops::MelWeightMatrix& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_output_datatype(ctx, op.output_datatype));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> bins, scalar_int_input(ctx, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> dft_length, scalar_int_input(ctx, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> rate, scalar_int_input(ctx, 2, "sample_rate"));
  KILN_RETURN_IF_ERROR(scalar_float_input(ctx, 3, "lower_edge_hertz"));
  KILN_RETURN_IF_ERROR(scalar_float_input(ctx, 4, "upper_edge_hertz"));
  if (bins && *bins < 1) return ctx.errorf("num_mel_bins must be >= 1, got {}", *bins);
  if (dft_length && *dft_length < 1)
    return ctx.errorf("dft_length must be >= 1, got {}", *dft_length);
  if (rate && *rate < 1) return ctx.errorf("sample_rate must be >= 1, got {}", *rate);
  Dim rows = dft_length ? Dim(*dft_length / 2 + 1) : Dim();
  Dim cols = bins ? Dim(*bins) : Dim();
  return std::vector<ValueType>{TensorType(op.output_datatype, {rows, cols})};
}

}  // namespace kiln::compiler
