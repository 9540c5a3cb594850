// SPDX-License-Identifier: Apache-2.0
// ref kernels for the image family's convolution-shaped ops: Col2Im and DeformConv, in double.
#include <cmath>
#include <numeric>

#include "compiler/ops/image.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// Advances a row-major multi-index over `sizes`; false after the last one.
bool next_index(std::vector<int64_t>& index, const std::vector<int64_t>& sizes) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < sizes[d]) return true;
    index[d] = 0;
  }
  return false;
}

}  // namespace

template <>
Status run_op(const ops::Col2Im& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> image = tensor_to_ints(ctx.input(1));
  const std::vector<int64_t> block = tensor_to_ints(ctx.input(2));
  KILN_ASSIGN_OR_RETURN(
      WindowGeometry g,
      ctx.named(forward_window(image, block, {"NOTSET", op.strides, op.dilations, op.pads})));
  const int64_t batch = x.shape()[0];
  const int64_t block_size = product(block);
  const int64_t channels = x.shape()[1] / block_size;
  const int64_t columns = product(g.out);
  if (x.shape()[2] != columns) {
    return ctx.errorf("the image holds {} blocks, but the input's dim 2 is {}", columns,
                      x.shape()[2]);
  }
  const int64_t plane = product(image);
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(static_cast<size_t>(batch * channels * plane), 0.0);
  const size_t n = image.size();
  // Every column element adds into the image pixel its block position k and column l land on.
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      std::vector<int64_t> k(n, 0);
      int64_t k_flat = 0;
      do {
        std::vector<int64_t> l(n, 0);
        int64_t l_flat = 0;
        do {
          int64_t at = 0;
          bool inside = true;
          for (size_t a = 0; a < n; ++a) {
            const int64_t p = l[a] * g.strides[a] - g.pad_begin[a] + k[a] * g.dilations[a];
            inside &= p >= 0 && p < image[a];
            at = at * image[a] + p;
          }
          if (inside) {
            yd[static_cast<size_t>((b * channels + c) * plane + at)] += xd[static_cast<size_t>(
                ((b * channels + c) * block_size + k_flat) * columns + l_flat)];
          }
          ++l_flat;
        } while (next_index(l, g.out));
        ++k_flat;
      } while (next_index(k, block));
    }
  }
  store_doubles(yd, ctx.output(0));
  return Status();
}

template <>
Status run_op(const ops::DeformConv& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  Tensor& y = ctx.output(0);
  const int64_t batch = x.shape()[0], c_in = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t c_out = w.shape()[0], c_in_g = w.shape()[1];
  const int64_t kh = w.shape()[2], kw = w.shape()[3];
  const int64_t oh = y.shape()[2], ow = y.shape()[3];
  const std::vector<int64_t> kernel = {kh, kw};
  KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                        ctx.named(forward_window(std::vector<int64_t>{h, wd}, kernel,
                                                 {"NOTSET", op.strides, op.dilations, op.pads})));
  const int64_t groups = op.group, offset_groups = op.offset_group;
  if (c_out % groups != 0 || c_in % offset_groups != 0) {
    return ctx.errorf(
        "output channels {} and input channels {} must divide by group {} and offset_group {}",
        c_out, c_in, groups, offset_groups);
  }
  if (offset.shape()[1] != offset_groups * kh * kw * 2 || offset.shape()[2] != oh ||
      offset.shape()[3] != ow) {
    return ctx.errorf("expected offset [{}, {}, {}, {}], got {}", batch,
                      offset_groups * kh * kw * 2, oh, ow, offset.shape().to_string());
  }
  const bool has_mask = ctx.has_input(4);
  if (has_mask && ctx.input(4).numel() != batch * offset_groups * kh * kw * oh * ow) {
    return ctx.errorf("expected mask [{}, {}, {}, {}], got {}", batch, offset_groups * kh * kw, oh,
                      ow, ctx.input(4).shape().to_string());
  }
  const std::vector<double> xv = tensor_to_doubles(x);
  const std::vector<double> wv = tensor_to_doubles(w);
  const std::vector<double> off = tensor_to_doubles(offset);
  const std::vector<double> mask =
      has_mask ? tensor_to_doubles(ctx.input(4)) : std::vector<double>();
  const std::vector<double> bias =
      ctx.has_input(3) ? tensor_to_doubles(ctx.input(3)) : std::vector<double>();
  const int64_t c_out_g = c_out / groups;
  const int64_t c_per_offset = c_in / offset_groups;
  const int64_t taps = kh * kw;
  // Bilinear sample of plane (b, c) at real (py, px); pixels outside read 0.
  auto sample = [&](int64_t b, int64_t c, double py, double px) {
    const double y0 = std::floor(py), x0 = std::floor(px);
    const double ty = py - y0, tx = px - x0;
    double v = 0.0;
    for (int dy = 0; dy < 2; ++dy) {
      for (int dx = 0; dx < 2; ++dx) {
        const double yy = y0 + dy, xx = x0 + dx;
        if (!(yy >= 0 && yy < static_cast<double>(h) && xx >= 0 && xx < static_cast<double>(wd)))
          continue;
        const double weight = (dy ? ty : 1 - ty) * (dx ? tx : 1 - tx);
        v += weight * xv[static_cast<size_t>(((b * c_in + c) * h + static_cast<int64_t>(yy)) * wd +
                                             static_cast<int64_t>(xx))];
      }
    }
    return v;
  };
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  std::vector<double> sampled(static_cast<size_t>(c_in * taps));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        // The deformed, masked samples of every input channel at every kernel tap.
        for (int64_t c = 0; c < c_in; ++c) {
          const int64_t og = c / c_per_offset;
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t ki = t / kw, kj = t % kw;
            const auto o = [&](int64_t comp) {
              return off[static_cast<size_t>(
                  (((b * offset_groups + og) * taps + t) * 2 + comp) * oh * ow + i * ow + j)];
            };
            const double py =
                static_cast<double>(i * g.strides[0] - g.pad_begin[0] + ki * g.dilations[0]) + o(0);
            const double px =
                static_cast<double>(j * g.strides[1] - g.pad_begin[1] + kj * g.dilations[1]) + o(1);
            double v = sample(b, c, py, px);
            if (has_mask)
              v *= mask[static_cast<size_t>(((b * offset_groups + og) * taps + t) * oh * ow +
                                            i * ow + j)];
            sampled[static_cast<size_t>(c * taps + t)] = v;
          }
        }
        for (int64_t m = 0; m < c_out; ++m) {
          const int64_t first = (m / c_out_g) * c_in_g;
          double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < c_in_g; ++c) {
            for (int64_t t = 0; t < taps; ++t) {
              sum += wv[static_cast<size_t>((m * c_in_g + c) * taps + t)] *
                     sampled[static_cast<size_t>((first + c) * taps + t)];
            }
          }
          out[static_cast<size_t>(((b * c_out + m) * oh + i) * ow + j)] = sum;
        }
      }
    }
  }
  store_doubles(out, y);
  return Status();
}

}  // namespace kiln::compiler::ref
