// SPDX-License-Identifier: Apache-2.0
// Integer convolution and matmul loops for the quantize family's ref kernels.
#include "compiler/targets/ref/quantize_util.h"

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

std::vector<int64_t> conv_accumulate(const Tensor& x, const Tensor& w, int64_t x_zp,
                                     const std::vector<int64_t>& w_zp, int64_t group,
                                     const ConvGeometry& g) {
  const std::vector<int64_t> xv = tensor_to_ints(x);
  const std::vector<int64_t> wv = tensor_to_ints(w);
  const Shape& xs = x.shape();
  const int n_spatial = xs.rank() - 2;
  const int64_t batch = xs[0];
  const int64_t channels = xs[1];
  const int64_t out_channels = w.shape()[0];
  const int64_t group_in = w.shape()[1];
  const int64_t group_out = out_channels / group;
  const Shape in_shape(std::vector<int64_t>(xs.begin() + 2, xs.end()));
  const Shape kernel_shape(g.kernel);
  const Shape out_shape(g.output);
  const int64_t in_size = in_shape.numel();
  const int64_t kernel_size = kernel_shape.numel();
  const int64_t out_size = out_shape.numel();

  std::vector<std::vector<int64_t>> taps;
  for (int64_t k = 0; k < kernel_size; ++k) taps.push_back(unravel_index(k, kernel_shape));

  std::vector<int64_t> acc(static_cast<size_t>(batch * out_channels * out_size), 0);
  std::vector<int64_t> in_index(static_cast<size_t>(n_spatial));
  for (int64_t o = 0; o < out_size; ++o) {
    const std::vector<int64_t> out_index = unravel_index(o, out_shape);
    for (int64_t k = 0; k < kernel_size; ++k) {
      bool inside = true;
      for (int d = 0; d < n_spatial; ++d) {
        const auto du = static_cast<size_t>(d);
        in_index[du] = out_index[du] * g.strides[du] - g.pads_begin[du] +
                       taps[static_cast<size_t>(k)][du] * g.dilations[du];
        inside = inside && in_index[du] >= 0 && in_index[du] < in_shape[d];
      }
      if (!inside) continue;
      const int64_t in_offset = ravel_index(in_index, in_shape);
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t m = 0; m < out_channels; ++m) {
          const int64_t first_channel = (m / group_out) * group_in;
          int64_t sum = 0;
          for (int64_t c = 0; c < group_in; ++c) {
            const int64_t xi = (n * channels + first_channel + c) * in_size + in_offset;
            const int64_t wi = (m * group_in + c) * kernel_size + k;
            sum += (xv[static_cast<size_t>(xi)] - x_zp) *
                   (wv[static_cast<size_t>(wi)] - w_zp[static_cast<size_t>(m)]);
          }
          acc[static_cast<size_t>((n * out_channels + m) * out_size + o)] += sum;
        }
      }
    }
  }
  for (int64_t& v : acc) v = static_cast<int32_t>(v);
  return acc;
}

Result<MatMulParam> matmul_param(const KernelContext& ctx, const Tensor& param,
                                 const Shape& operand, bool per_row) {
  MatMulParam p;
  p.values = tensor_to_doubles(param);
  const int r = operand.rank();
  const int64_t lines = r < 2 ? 1 : per_row ? operand[r - 2] : operand[r - 1];
  const int64_t matrices = r < 2 ? 1 : operand.numel(0, r - 2);
  const auto n = static_cast<int64_t>(p.values.size());
  const bool ok =
      n == 1 || (param.rank() == 1 && n == lines) || (param.rank() == r && n == lines * matrices);
  if (!ok) {
    return ctx.errorf("a zero point or scale of shape {} does not fit an operand of shape {}",
                      param.shape().to_string(), operand.to_string());
  }
  return p;
}

Status matmul_accumulate(const KernelContext& ctx, const Tensor& a, const Tensor& b,
                         const MatMulParam& a_zp, const MatMulParam& b_zp,
                         const std::function<void(int64_t, int64_t, int64_t, int64_t)>& out) {
  std::vector<int64_t> ad = a.shape().dims();
  std::vector<int64_t> bd = b.shape().dims();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const int64_t rows = ad[ad.size() - 2];
  const int64_t depth = ad.back();
  const int64_t cols = bd.back();
  if (bd[bd.size() - 2] != depth) {
    return ctx.errorf("inner dims differ: A {} and B {}", a.shape().to_string(),
                      b.shape().to_string());
  }
  const Shape a_batch(std::vector<int64_t>(ad.begin(), ad.end() - 2));
  const Shape b_batch(std::vector<int64_t>(bd.begin(), bd.end() - 2));
  KILN_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(a_batch, b_batch));
  const std::vector<int64_t> av = tensor_to_ints(a);
  const std::vector<int64_t> bv = tensor_to_ints(b);
  for_each_broadcast(batch, a_batch, b_batch, [&](int64_t o, int64_t ia, int64_t ib) {
    for (int64_t m = 0; m < rows; ++m) {
      const int64_t a_line = ia * rows + m;
      const int64_t azp = a_zp.zero_point(a_line);
      for (int64_t n = 0; n < cols; ++n) {
        const int64_t b_line = ib * cols + n;
        const int64_t bzp = b_zp.zero_point(b_line);
        int64_t acc = 0;
        for (int64_t k = 0; k < depth; ++k) {
          acc += (av[static_cast<size_t>(a_line * depth + k)] - azp) *
                 (bv[static_cast<size_t>((ib * depth + k) * cols + n)] - bzp);
        }
        out((o * rows + m) * cols + n, a_line, b_line, static_cast<int32_t>(acc));
      }
    }
  });
  return Status();
}

}  // namespace kiln::compiler::ref
