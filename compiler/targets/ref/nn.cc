// SPDX-License-Identifier: Apache-2.0
// ref kernels for the nn family's convolutions and pooling (nn_norm.cc: the rest). They compute
// in double precision and round once into the output's element type.
#include "compiler/ops/nn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "compiler/ops/infer_util.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/nn_util.h"

namespace kiln::compiler::ref {

namespace {

std::vector<int64_t> spatial(const Tensor& t) {
  return std::vector<int64_t>(t.shape().begin() + 2, t.shape().end());
}

int64_t product(std::span<const int64_t> v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// The kernel's spatial dims: the kernel_shape attribute, else the weights' trailing dims.
std::vector<int64_t> conv_kernel(const std::optional<std::vector<int64_t>>& kernel_shape,
                                 const Tensor& w) {
  return kernel_shape ? *kernel_shape : spatial(w);
}

// The bias of `channels` values (input 2), or zeros.
std::vector<double> conv_bias(const KernelContext& ctx, int64_t channels) {
  if (ctx.has_input(2)) return tensor_to_doubles(ctx.input(2));
  return std::vector<double>(static_cast<size_t>(channels), 0.0);
}

// The shared walk of the windowed pooling ops: f(plane, out_offset, out_index, offsets) for each
// input plane (batch x channel) and output position, with the window's in-plane offsets (-1:
// padding).
template <class F>
void for_each_window(const WindowGeometry& g, const Tensor& x, F&& f) {
  const std::vector<int64_t> in = spatial(x);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t plane_out = product(g.out);
  std::vector<int64_t> offsets;
  int64_t o = 0;
  for_each_index(g.out, [&](const std::vector<int64_t>& index) {
    window_offsets(g, in, index, offsets);
    for (int64_t p = 0; p < planes; ++p) f(p, p * plane_out + o, index, offsets);
    ++o;
  });
}

}  // namespace

template <>
Status run_op(const ops::Conv& op, KernelContext& ctx) {
  if (op.activation && *op.activation != "Relu") {
    return ctx.errorf("unknown fused activation \"{}\"", *op.activation);
  }
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const std::vector<int64_t> in = spatial(x);
  KILN_ASSIGN_OR_RETURN(
      WindowGeometry g,
      ctx.named(forward_window(in, conv_kernel(op.kernel_shape, w),
                                    {op.auto_pad, op.strides, op.dilations, op.pads})));
  const int64_t batch = x.shape()[0];
  const int64_t c_in = x.shape()[1];
  const int64_t c_out = w.shape()[0];
  const int64_t groups = op.group;
  const int64_t c_in_g = c_in / groups;
  const int64_t c_out_g = c_out / groups;
  const int64_t plane_in = product(in);
  const int64_t plane_out = product(g.out);
  const int64_t k_count = product(g.kernel);
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> wd = tensor_to_doubles(w);
  const std::vector<double> bias = conv_bias(ctx, c_out);
  std::vector<double> yd(static_cast<size_t>(batch * c_out * plane_out));
  std::vector<int64_t> offsets;
  int64_t o = 0;
  for_each_index(g.out, [&](const std::vector<int64_t>& index) {
    window_offsets(g, in, index, offsets);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t m = 0; m < c_out; ++m) {
        const int64_t group = m / c_out_g;
        double acc = bias[static_cast<size_t>(m)];
        for (int64_t c = 0; c < c_in_g; ++c) {
          const double* xp = xd.data() + (b * c_in + group * c_in_g + c) * plane_in;
          const double* wp = wd.data() + (m * c_in_g + c) * k_count;
          for (int64_t k = 0; k < k_count; ++k) {
            const int64_t off = offsets[static_cast<size_t>(k)];
            if (off >= 0) acc += xp[off] * wp[k];
          }
        }
        if (op.activation) acc = std::max(acc, 0.0);  // "Relu"
        yd[static_cast<size_t>((b * c_out + m) * plane_out + o)] = acc;
      }
    }
    ++o;
  });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::ConvTranspose& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const std::vector<int64_t> in = spatial(x);
  KILN_ASSIGN_OR_RETURN(
      WindowGeometry g,
      ctx.named(transpose_window(in, conv_kernel(op.kernel_shape, w),
                                      {op.auto_pad, op.strides, op.dilations, op.pads},
                                      op.output_padding, op.output_shape)));
  const size_t n = in.size();
  const int64_t batch = x.shape()[0];
  const int64_t c_in = x.shape()[1];
  const int64_t c_out_g = w.shape()[1];
  const int64_t groups = op.group;
  const int64_t c_in_g = c_in / groups;
  const int64_t c_out = c_out_g * groups;
  const int64_t plane_in = product(in);
  const int64_t plane_out = product(g.out);
  const int64_t k_count = product(g.kernel);
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> wd = tensor_to_doubles(w);
  const std::vector<double> bias = conv_bias(ctx, c_out);
  std::vector<double> yd(static_cast<size_t>(batch * c_out * plane_out));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t m = 0; m < c_out; ++m) {
      double* yp = yd.data() + (b * c_out + m) * plane_out;
      for (int64_t i = 0; i < plane_out; ++i) yp[i] = bias[static_cast<size_t>(m)];
    }
  }
  // Where each kernel element of the input position lands in the output plane (-1: cropped).
  std::vector<int64_t> targets(static_cast<size_t>(k_count));
  int64_t ip = 0;
  for_each_index(in, [&](const std::vector<int64_t>& index) {
    size_t t = 0;
    for_each_index(g.kernel, [&](const std::vector<int64_t>& k) {
      int64_t offset = 0;
      for (size_t a = 0; a < n; ++a) {
        const int64_t pos = index[a] * g.strides[a] + k[a] * g.dilations[a] - g.pad_begin[a];
        if (pos < 0 || pos >= g.out[a]) {
          offset = -1;
          break;
        }
        offset = offset * g.out[a] + pos;
      }
      targets[t++] = offset;
    });
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < c_in; ++c) {
        const double v = xd[static_cast<size_t>((b * c_in + c) * plane_in + ip)];
        const int64_t group = c / c_in_g;
        for (int64_t m = 0; m < c_out_g; ++m) {
          double* yp = yd.data() + (b * c_out + group * c_out_g + m) * plane_out;
          const double* wp = wd.data() + (c * c_out_g + m) * k_count;
          for (int64_t k = 0; k < k_count; ++k) {
            const int64_t off = targets[static_cast<size_t>(k)];
            if (off >= 0) yp[off] += v * wp[k];
          }
        }
      }
    }
    ++ip;
  });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::AveragePool& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> in = spatial(x);
  KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                        ctx.named(forward_window(in, *op.kernel_shape,
                                                      {op.auto_pad, op.strides, op.dilations,
                                                       op.pads, op.ceil_mode != 0})));
  const int64_t plane_in = product(in);
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(static_cast<size_t>(ctx.output(0).numel()));
  for_each_window(
      g, x,
      [&](int64_t p, int64_t o, const std::vector<int64_t>& index,
          const std::vector<int64_t>& offsets) {
        double sum = 0;
        int64_t count = 0;
        for (int64_t off : offsets) {
          if (off < 0) continue;
          sum += xd[static_cast<size_t>(p * plane_in + off)];
          ++count;
        }
        if (op.count_include_pad != 0) {
          // Padding counts, but not the taps of a ceil-mode window that hang past the padding.
          count = 1;
          for (size_t a = 0; a < in.size(); ++a) {
            const int64_t start = index[a] * g.strides[a] - g.pad_begin[a];
            const int64_t room = in[a] + g.pad_end[a] - start;  // positions left in the padding
            count *= std::min(g.kernel[a], (room + g.dilations[a] - 1) / g.dilations[a]);
          }
        }
        yd[static_cast<size_t>(o)] =
            count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
      });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::MaxPool& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> in = spatial(x);
  KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                        ctx.named(forward_window(in, *op.kernel_shape,
                                                      {op.auto_pad, op.strides, op.dilations,
                                                       op.pads, op.ceil_mode != 0})));
  const int64_t plane_in = product(in);
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(static_cast<size_t>(ctx.output(0).numel()));
  const bool want_indices = ctx.num_outputs() > 1 && ctx.output_used(1);
  int64_t* indices = want_indices ? ctx.output(1).data<int64_t>() : nullptr;
  for_each_window(
      g, x,
      [&](int64_t p, int64_t o, const std::vector<int64_t>&, const std::vector<int64_t>& offsets) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t arg = -1;
        for (int64_t off : offsets) {
          if (off < 0) continue;
          const double v = xd[static_cast<size_t>(p * plane_in + off)];
          if (arg < 0 || v > best) {
            best = v;
            arg = off;
          }
        }
        yd[static_cast<size_t>(o)] = best;
        if (indices == nullptr) return;
        int64_t flat = arg < 0 ? 0 : arg;
        if (op.storage_order == 1 && arg >= 0) {
          // Column-major: the first spatial axis varies fastest.
          int64_t rest = arg;
          int64_t col = 0;
          int64_t scale = 1;
          std::vector<int64_t> pos(in.size());
          for (size_t a = in.size(); a-- > 0;) {
            pos[a] = rest % in[a];
            rest /= in[a];
          }
          for (size_t a = 0; a < in.size(); ++a) {
            col += pos[a] * scale;
            scale *= in[a];
          }
          flat = col;
        }
        indices[o] = p * plane_in + flat;
      });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::LpPool& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> in = spatial(x);
  KILN_ASSIGN_OR_RETURN(
      WindowGeometry g,
      ctx.named(forward_window(in, *op.kernel_shape,
                                    {op.auto_pad, op.strides, op.dilations, op.pads,
                                     op.ceil_mode != 0})));
  const int64_t plane_in = product(in);
  const auto p_norm = static_cast<double>(op.p);
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(static_cast<size_t>(ctx.output(0).numel()));
  for_each_window(
      g, x,
      [&](int64_t p, int64_t o, const std::vector<int64_t>&, const std::vector<int64_t>& offsets) {
        double sum = 0;
        for (int64_t off : offsets) {
          if (off < 0) continue;
          sum += std::pow(std::abs(xd[static_cast<size_t>(p * plane_in + off)]), p_norm);
        }
        yd[static_cast<size_t>(o)] = std::pow(sum, 1.0 / p_norm);
      });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

namespace {

// The global pools: `reduce(values of one plane)` for each batch x channel plane.
template <class F>
Status global_pool(KernelContext& ctx, F&& reduce) {
  const Tensor& x = ctx.input(0);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t plane = planes == 0 ? 0 : x.numel() / planes;
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    yd[static_cast<size_t>(p)] =
        reduce(std::span<const double>(xd.data() + p * plane, static_cast<size_t>(plane)));
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::GlobalAveragePool& /*op*/, KernelContext& ctx) {
  return global_pool(ctx, [](std::span<const double> v) {
    double sum = 0;
    for (double d : v) sum += d;
    return sum / static_cast<double>(v.size());
  });
}

template <>
Status run_op(const ops::GlobalMaxPool& /*op*/, KernelContext& ctx) {
  return global_pool(ctx, [](std::span<const double> v) {
    double best = -std::numeric_limits<double>::infinity();
    for (double d : v) best = std::max(best, d);
    return best;
  });
}

template <>
Status run_op(const ops::GlobalLpPool& op, KernelContext& ctx) {
  const auto p = static_cast<double>(op.p);
  return global_pool(ctx, [p](std::span<const double> v) {
    double sum = 0;
    for (double d : v) sum += std::pow(std::abs(d), p);
    return std::pow(sum, 1.0 / p);
  });
}

template <>
Status run_op(const ops::MaxUnpool& /*op*/, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t* idx = indices.data<int64_t>();
  const int64_t size = y.numel();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    if (idx[i] < 0 || idx[i] >= size) {
      return ctx.errorf("index {} is out of range for the output {}", idx[i],
                        y.shape().to_string());
    }
  }
  return visit_dtype(x.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) dst[idx[i]] = src[i];
    return Status();
  });
}

}  // namespace kiln::compiler::ref
