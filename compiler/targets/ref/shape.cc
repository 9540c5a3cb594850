// SPDX-License-Identifier: Apache-2.0
// ref kernels for the shape op family: plain loops, the executable specification.
#include "compiler/ops/shape.h"

#include <algorithm>

#include "compiler/ops/infer_util.h"
#include "compiler/ops/shape_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/ref_util.h"
#include "compiler/targets/ref/shape_util.h"

namespace kiln::compiler::ref {

namespace {

// Ops that only relabel dims: the output shares the input's storage under the inferred shape.
Status alias_input(KernelContext& ctx) {
  const Shape shape = ctx.output(0).shape();
  ctx.set_output(0, Argument(ctx.input(0).reshaped(shape)));
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::Reshape&, KernelContext& ctx) {
  return alias_input(ctx);
}

template <>
Status run_op(const ops::Flatten&, KernelContext& ctx) {
  return alias_input(ctx);
}

template <>
Status run_op(const ops::Squeeze&, KernelContext& ctx) {
  return alias_input(ctx);
}

template <>
Status run_op(const ops::Unsqueeze&, KernelContext& ctx) {
  return alias_input(ctx);
}

template <>
Status run_op(const ops::Transpose& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.named(transpose_perm(op, in.rank())));
  const std::vector<int64_t> in_strides = in.shape().strides();
  std::vector<int64_t> strides;
  for (int64_t p : perm) strides.push_back(in_strides[static_cast<size_t>(p)]);
  strided_copy(in, 0, strides, out.shape(), out);
  return Status();
}

template <>
Status run_op(const ops::Concat& op, KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const int axis = static_cast<int>(*op.axis < 0 ? *op.axis + out.rank() : *op.axis);
  const int64_t outer = out.shape().numel(0, axis);
  const int64_t out_chunk = out.shape().numel(axis, out.rank());
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& in = ctx.input(i);
    const int64_t chunk = in.shape().numel(axis, in.rank());
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(in, o * chunk, out, o * out_chunk + offset, chunk);
    offset += chunk;
  }
  return Status();
}

template <>
Status run_op(const ops::Split& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + in.rank() : op.axis);
  const int64_t outer = in.shape().numel(0, axis);
  const int64_t in_chunk = in.shape().numel(axis, in.rank());
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.output(i);
    const int64_t chunk = out.shape().numel(axis, out.rank());
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(in, o * in_chunk + offset, out, o * chunk, chunk);
    offset += chunk;
  }
  return Status();
}

template <>
Status run_op(const ops::Slice&, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) axes = tensor_to_ints(ctx.input(3));
  if (ctx.has_input(4)) steps = tensor_to_ints(ctx.input(4));
  KILN_ASSIGN_OR_RETURN(std::vector<SliceAxis> sl,
                        ctx.named(resolve_slice(in.shape().dims(), tensor_to_ints(ctx.input(1)),
                                                 tensor_to_ints(ctx.input(2)), axes, steps)));
  std::vector<int64_t> strides = in.shape().strides();
  int64_t offset = 0;
  for (const SliceAxis& s : sl) {
    auto a = static_cast<size_t>(s.axis);
    if (s.count > 0) offset += s.start * strides[a];
    strides[a] = s.count > 1 ? strides[a] * s.step : 0;  // a huge step is taken at most once
  }
  if (out.numel() > 0) strided_copy(in, offset, strides, out.shape(), out);
  return Status();
}

template <>
Status run_op(const ops::Tile&, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> in_strides = in.shape().strides();
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    int64_t o = 0;
    for_each_index(out.shape(), [&](const std::vector<int64_t>& idx) {
      int64_t at = 0;
      for (int d = 0; d < in.rank(); ++d)
        at += (idx[static_cast<size_t>(d)] % in.shape()[d]) * in_strides[static_cast<size_t>(d)];
      dst[o++] = src[at];
    });
  });
  return Status();
}

template <>
Status run_op(const ops::Expand&, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  strided_copy(in, 0, broadcast_strides(in.shape(), out.shape()), out.shape(), out);
  return Status();
}

template <>
Status run_op(const ops::Pad& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int r = in.rank();
  std::vector<int64_t> pads = tensor_to_ints(ctx.input(1));
  if (ctx.has_input(3)) {
    // Opset 18's axes: the pads are [begins..., ends...] of these axes only (inference checked
    // them).
    const std::vector<int64_t> axes = tensor_to_ints(ctx.input(3));
    const size_t n = axes.size();
    std::vector<int64_t> all(2 * static_cast<size_t>(r), 0);
    for (size_t i = 0; i < n; ++i) {
      const auto d = static_cast<size_t>(axes[i] < 0 ? axes[i] + r : axes[i]);
      all[d] = pads[i];
      all[d + static_cast<size_t>(r)] = pads[i + n];
    }
    pads = std::move(all);
  }
  // For each axis, the input coordinate of every output coordinate, or -1 for the constant.
  std::vector<std::vector<int64_t>> source(static_cast<size_t>(r));
  for (int d = 0; d < r; ++d) {
    const int64_t n = in.shape()[d], before = pads[static_cast<size_t>(d)];
    for (int64_t o = 0; o < out.shape()[d]; ++o) {
      int64_t i = o - before;
      if (i < 0 || i >= n) {
        if (op.mode == "constant") {
          i = -1;
        } else if (op.mode == "edge") {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else if (op.mode == "wrap") {
          i = ((i % n) + n) % n;
        } else if (n == 1) {
          i = 0;
        } else {
          const int64_t period = 2 * (n - 1);
          i = ((i % period) + period) % period;
          if (i >= n) i = period - i;
        }
      }
      source[static_cast<size_t>(d)].push_back(i);
    }
  }
  const std::vector<int64_t> strides = in.shape().strides();
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    T fill{};
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) fill = ctx.input(2).data<T>()[0];
    int64_t o = 0;
    for_each_index(out.shape(), [&](const std::vector<int64_t>& idx) {
      int64_t at = 0;
      for (int d = 0; d < r && at >= 0; ++d) {
        const int64_t i =
            source[static_cast<size_t>(d)][static_cast<size_t>(idx[static_cast<size_t>(d)])];
        at = i < 0 ? -1 : at + i * strides[static_cast<size_t>(d)];
      }
      dst[o++] = at < 0 ? fill : src[at];
    });
  });
  return Status();
}

template <>
Status run_op(const ops::Shape& op, KernelContext& ctx) {
  const Shape& shape = ctx.input(0).shape();
  auto [start, end] = shape_range(op, shape.rank());
  int64_t* out = ctx.output(0).data<int64_t>();
  for (int64_t i = start; i < end; ++i) out[i - start] = shape[static_cast<int>(i)];
  return Status();
}

template <>
Status run_op(const ops::Size&, KernelContext& ctx) {
  *ctx.output(0).data<int64_t>() = ctx.input(0).numel();
  return Status();
}

template <>
Status run_op(const ops::DepthToSpace& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int64_t b = *op.blocksize, n = in.shape()[0], c = in.shape()[1] / (b * b),
                h = in.shape()[2], w = in.shape()[3];
  const int64_t hw = h * w;
  // Output viewed as [N, C/b^2, H, b, W, b]; the channel of (b1, b2, c) depends on the mode.
  const int64_t sc = op.mode == "DCR" ? hw : b * b * hw;
  const int64_t sb1 = op.mode == "DCR" ? b * c * hw : b * hw;
  const int64_t sb2 = op.mode == "DCR" ? c * hw : hw;
  const std::vector<int64_t> strides = {in.shape()[1] * hw, sc, w, sb1, 1, sb2};
  strided_copy(in, 0, strides, Shape{n, c, h, b, w, b}, out);
  return Status();
}

template <>
Status run_op(const ops::SpaceToDepth& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int64_t b = *op.blocksize, n = in.shape()[0], c = in.shape()[1], h = in.shape()[2],
                w = in.shape()[3];
  if (op.mode == "CRD") {
    // Output viewed as [N, C, b, b, H/b, W/b].
    const std::vector<int64_t> strides = {c * h * w, h * w, w, 1, b * w, b};
    strided_copy(in, 0, strides, Shape{n, c, b, b, h / b, w / b}, out);
    return Status();
  }
  // Output viewed as [N, b, b, C, H/b, W/b].
  const std::vector<int64_t> strides = {c * h * w, w, 1, h * w, b * w, b};
  strided_copy(in, 0, strides, Shape{n, b, b, c, h / b, w / b}, out);
  return Status();
}

template <>
Status run_op(const ops::Constant& op, KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(Tensor value, ctx.named(constant_tensor(op)));
  ctx.set_output(0, Argument(std::move(value)));
  return Status();
}

template <>
Status run_op(const ops::ConstantOfShape& op, KernelContext& ctx) {
  if (!op.value.defined()) return Status();  // f32 zeros, as allocated
  Tensor& out = ctx.output(0);
  visit_dtype(out.dtype(),
              [&]<class T>() { std::fill_n(out.data<T>(), out.numel(), op.value.data<T>()[0]); });
  return Status();
}

template <>
Status run_op(const ops::Range&, KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T start = ctx.input(0).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      T* dst = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i)
        dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    } else if constexpr (kIsHalfLike<T>) {
      // f16 and bf16 step in f32, each element rounded once.
      const float start = ctx.input(0).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      T* dst = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) dst[i] = T(start + static_cast<float>(i) * delta);
    }
  });
  return Status();
}

template <>
Status run_op(const ops::EyeLike& op, KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const int64_t rows = out.shape()[0], cols = out.shape()[1];
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      T* dst = out.data<T>();
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t j = i + op.k;
        if (j >= 0 && j < cols) dst[i * cols + j] = static_cast<T>(1);
      }
    }
  });
  return Status();
}

template <>
Status run_op(const ops::CenterCropPad& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int rank = in.rank();
  // out[i] = in[i + shift] per axis: the crop's start for a smaller size, minus the pad's start for
  // a larger one (centered, the odd pixel at the end); out of range reads zero.
  std::vector<int64_t> shift(static_cast<size_t>(rank), 0);
  for (int d = 0; d < rank; ++d) {
    const int64_t from = in.shape()[d], to = out.shape()[d];
    shift[static_cast<size_t>(d)] = from >= to ? (from - to) / 2 : -((to - from) / 2);
  }
  const std::vector<int64_t> in_strides = in.shape().strides();
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* x = in.data<T>();
    T* y = out.data<T>();
    for (int64_t o = 0; o < out.numel(); ++o) {
      int64_t at = 0;
      bool inside = true;
      for (int d = 0; d < rank; ++d) {
        const int64_t i = index[static_cast<size_t>(d)] + shift[static_cast<size_t>(d)];
        inside &= i >= 0 && i < in.shape()[d];
        at += i * in_strides[static_cast<size_t>(d)];
      }
      if (inside) y[o] = x[at];
      for (int d = rank - 1; d >= 0; --d) {
        if (++index[static_cast<size_t>(d)] < out.shape()[d]) break;
        index[static_cast<size_t>(d)] = 0;
      }
    }
  });
  return Status();
}

template <>
Status run_op(const ops::Trilu& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t k = 0;
  if (ctx.has_input(1)) {
    if (ctx.input(1).numel() != 1)
      return ctx.errorf("expected a one-element k, got {}", ctx.input(1).shape().to_string());
    k = tensor_to_ints(ctx.input(1))[0];
  }
  const int64_t rows = in.shape()[in.rank() - 2], cols = in.shape()[in.rank() - 1];
  const int64_t mats = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = op.upper != 0 ? j - i >= k : j - i <= k;
          const int64_t at = (m * rows + i) * cols + j;
          if (keep) dst[at] = src[at];
        }
      }
    }
  });
  return Status();
}

}  // namespace kiln::compiler::ref
