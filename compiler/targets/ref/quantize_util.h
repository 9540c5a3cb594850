// SPDX-License-Identifier: Apache-2.0
// Integer loops shared by the quantize family's ref kernels: rounding, convolution and matmul.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "compiler/ops/quantize_conv.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

// Rounds half to even, adds the zero point and saturates to Q's range (an integer type, also the
// 4- and 2-bit ones); NaN maps to the zero point.
template <class Q>
Q saturate_round(double v, int64_t zero_point) {
  const double r = std::isnan(v) ? 0.0 : std::nearbyint(v);
  if constexpr (kIsSmallInt<Q>) {
    const double q =
        std::clamp(r + static_cast<double>(zero_point), double{Q::kMin}, double{Q::kMax});
    return Q::wrap(static_cast<int64_t>(q));
  } else {
    const double q = std::clamp(r + static_cast<double>(zero_point),
                                static_cast<double>(std::numeric_limits<Q>::min()),
                                static_cast<double>(std::numeric_limits<Q>::max()));
    return static_cast<Q>(q);
  }
}

// QuantizeLinear of one value: saturate(round(x / scale) + zero_point). Floating inputs divide in
// float (as the ONNX reference does), integer inputs in double.
template <class Q, class T>
Q quantize_value(T x, float scale, int64_t zero_point) {
  if constexpr (std::is_integral_v<T>) {
    return saturate_round<Q>(static_cast<double>(x) / static_cast<double>(scale), zero_point);
  } else {
    return saturate_round<Q>(static_cast<float>(x) / scale, zero_point);
  }
}

// The requantization of an i32 accumulator: saturate(round(acc * multiplier) + zero_point), with
// the product in float.
template <class Q>
Q requantize(int32_t acc, float multiplier, int64_t zero_point) {
  return saturate_round<Q>(static_cast<float>(acc) * multiplier, zero_point);
}

// The geometry of a ConvInteger or QLinearConv with input shape x and weight shape w (validated by
// inference: same rank >= 3).
template <class ConvOp>
Result<ConvGeometry> conv_geometry_for(const ConvOp& op, const KernelContext& ctx, const Shape& x,
                                       const Shape& w) {
  std::vector<int64_t> in(x.begin() + 2, x.end());
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  Result<ConvGeometry> g =
      conv_geometry(in, kernel, op.auto_pad, op.strides, op.dilations, op.pads);
  if (!g.ok()) return ctx.error(g.status().message());
  return g;
}

// The integer convolution of x [N, C, spatial...] with w [M, C/group, kernel...]:
// sum((x - x_zp) * (w - w_zp[m])), where padded positions hold x_zp (contribute nothing). Returns
// N*M*prod(output) accumulators in the output's row-major order, wrapped to i32 range.
std::vector<int64_t> conv_accumulate(const Tensor& x, const Tensor& w, int64_t x_zp,
                                     const std::vector<int64_t>& w_zp, int64_t group,
                                     const ConvGeometry& g);

// A zero point or scale of one matmul operand. Row r of matrix b of A (or column c of matrix b of
// B) is line l = b * lines + r; its parameter is values[l % values.size()]: one value for the
// whole tensor, one per row/column, or one per row/column of each matrix.
struct MatMulParam {
  std::vector<double> values{0.0};

  int64_t at(int64_t line) const { return line % static_cast<int64_t>(values.size()); }
  int64_t zero_point(int64_t line) const {
    return static_cast<int64_t>(values[static_cast<size_t>(at(line))]);
  }
};

// Reads `param` for an operand of shape `operand`: per_row for A, per column for B.
Result<MatMulParam> matmul_param(const KernelContext& ctx, const Tensor& param,
                                 const Shape& operand, bool per_row);

// numpy matmul of integer tensors a and b (batch dims broadcast, 1-D operands promoted) with zero
// points subtracted. Calls out(output_index, a_line, b_line, acc) for every output element.
Status matmul_accumulate(const KernelContext& ctx, const Tensor& a, const Tensor& b,
                         const MatMulParam& a_zp, const MatMulParam& b_zp,
                         const std::function<void(int64_t, int64_t, int64_t, int64_t)>& out);

}  // namespace kiln::compiler::ref
