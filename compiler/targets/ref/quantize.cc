// SPDX-License-Identifier: Apache-2.0
// ref kernels for the quantize op family: plain loops, the executable specification.
#include "compiler/ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/quantize_util.h"

namespace kiln::compiler::ref {

namespace {

// Where the per-axis parameters of (De)QuantizeLinear apply: element i of x uses parameter
// (i / inner) % count, or parameter 0 when there is one value.
struct AxisParams {
  int64_t inner = 1;
  int64_t count = 1;

  int64_t index(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

Result<AxisParams> axis_params(KernelContext& ctx, const Shape& x, int64_t axis, int64_t numel) {
  AxisParams p;
  if (numel == 1) return p;
  KILN_ASSIGN_OR_RETURN(int a, normalize_axis(axis, x.rank()));
  if (x[a] != numel) {
    return ctx.errorf("expected {} scale and zero point values along axis {}, got {}", x[a], axis,
                      numel);
  }
  p.inner = x.numel(a + 1, x.rank());
  p.count = numel;
  return p;
}

}  // namespace

template <>
Status run_op(const ops::QuantizeLinear& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(AxisParams ap, axis_params(ctx, x.shape(), op.axis, scale.numel()));
  const std::vector<int64_t> zp =
      ctx.has_input(2) ? tensor_to_ints(ctx.input(2)) : std::vector<int64_t>(1, 0);
  const float* s = scale.data<float>();
  Tensor& y = ctx.output(0);
  Status status;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      const T* px = x.data<T>();
      visit_dtype(y.dtype(), [&]<class Q>() {
        if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
          Q* py = y.data<Q>();
          for (int64_t i = 0; i < x.numel(); ++i) {
            const int64_t c = ap.index(i);
            py[i] = quantize_value<Q>(px[i], s[c], zp[zp.size() == 1 ? 0 : static_cast<size_t>(c)]);
          }
        } else {
          status = ctx.errorf("unsupported output type {}", dtype_name(y.dtype()));
        }
      });
    } else {
      status = ctx.errorf("unsupported input type {}", dtype_name(x.dtype()));
    }
  });
  return status;
}

template <>
Status run_op(const ops::DequantizeLinear& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(AxisParams ap, axis_params(ctx, x.shape(), op.axis, scale.numel()));
  const std::vector<int64_t> zp =
      ctx.has_input(2) ? tensor_to_ints(ctx.input(2)) : std::vector<int64_t>(1, 0);
  if (ctx.has_input(2) && static_cast<int64_t>(zp.size()) != scale.numel()) {
    return ctx.errorf("x_zero_point has {} values, x_scale has {}", zp.size(), scale.numel());
  }
  const std::vector<int64_t> xs = tensor_to_ints(x);
  const float* s = scale.data<float>();
  float* py = ctx.output(0).data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = ap.index(i);
    const int64_t q = xs[static_cast<size_t>(i)] - zp[zp.size() == 1 ? 0 : static_cast<size_t>(c)];
    py[i] = static_cast<float>(q) * s[c];
  }
  return Status();
}

template <>
Status run_op(const ops::DynamicQuantizeLinear&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* px = x.data<float>();
  float lo = 0.0f;
  float hi = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(px[i])) return ctx.error("input x contains NaN");
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  int64_t zero_point = 0;
  if (scale > 0.0f) {
    zero_point =
        static_cast<int64_t>(std::clamp(std::nearbyint((0.0f - lo) / scale), 0.0f, 255.0f));
  }
  uint8_t* py = ctx.output(0).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    py[i] = scale > 0.0f ? quantize_value<uint8_t>(px[i], scale, zero_point) : 0;
  }
  *ctx.output(1).data<float>() = scale;
  *ctx.output(2).data<uint8_t>() = static_cast<uint8_t>(zero_point);
  return Status();
}

template <>
Status run_op(const ops::ConvInteger& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, conv_geometry_for(op, ctx, x.shape(), w.shape()));
  const int64_t x_zp = ctx.has_input(2) ? tensor_to_ints(ctx.input(2)).at(0) : 0;
  std::vector<int64_t> w_zp =
      ctx.has_input(3) ? tensor_to_ints(ctx.input(3)) : std::vector<int64_t>{0};
  if (w_zp.size() == 1) w_zp.resize(static_cast<size_t>(w.shape()[0]), w_zp[0]);
  if (static_cast<int64_t>(w_zp.size()) != w.shape()[0]) {
    return ctx.errorf("w_zero_point must hold one value or {} (one per output channel), got {}",
                      w.shape()[0], w_zp.size());
  }
  const std::vector<int64_t> acc = conv_accumulate(x, w, x_zp, w_zp, op.group, g);
  int32_t* py = ctx.output(0).data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) py[i] = static_cast<int32_t>(acc[i]);
  return Status();
}

template <>
Status run_op(const ops::MatMulInteger&, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  MatMulParam a_zp, b_zp;
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(a_zp, matmul_param(ctx, ctx.input(2), a.shape(), true));
  }
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(b_zp, matmul_param(ctx, ctx.input(3), b.shape(), false));
  }
  int32_t* py = ctx.output(0).data<int32_t>();
  return matmul_accumulate(ctx, a, b, a_zp, b_zp, [&](int64_t i, int64_t, int64_t, int64_t acc) {
    py[i] = static_cast<int32_t>(acc);
  });
}

template <>
Status run_op(const ops::QLinearConv& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, conv_geometry_for(op, ctx, x.shape(), w.shape()));
  const int64_t channels = w.shape()[0];
  auto per_channel = [&](int i, std::vector<double> values) -> Result<std::vector<double>> {
    if (values.size() == 1) values.resize(static_cast<size_t>(channels), values[0]);
    if (static_cast<int64_t>(values.size()) != channels) {
      return ctx.errorf("input {} must hold one value or {} (one per output channel), got {}", i,
                        channels, values.size());
    }
    return values;
  };
  const float x_scale = ctx.input(1).data<float>()[0];
  const int64_t x_zp = tensor_to_ints(ctx.input(2)).at(0);
  KILN_ASSIGN_OR_RETURN(std::vector<double> w_scale,
                        per_channel(4, tensor_to_doubles(ctx.input(4))));
  KILN_ASSIGN_OR_RETURN(std::vector<double> w_zp_d,
                        per_channel(5, tensor_to_doubles(ctx.input(5))));
  const float y_scale = ctx.input(6).data<float>()[0];
  const int64_t y_zp = tensor_to_ints(ctx.input(7)).at(0);
  std::vector<int64_t> w_zp(w_zp_d.begin(), w_zp_d.end());
  std::vector<int64_t> bias(static_cast<size_t>(channels), 0);
  if (ctx.has_input(8)) {
    bias = tensor_to_ints(ctx.input(8));
    if (static_cast<int64_t>(bias.size()) != channels) {
      return ctx.errorf("bias B must hold {} values (one per output channel), got {}", channels,
                        bias.size());
    }
  }
  const std::vector<int64_t> acc = conv_accumulate(x, w, x_zp, w_zp, op.group, g);
  Tensor& y = ctx.output(0);
  const int64_t spatial = y.shape().numel(2, y.rank());
  visit_dtype(y.dtype(), [&]<class Q>() {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
      Q* py = y.data<Q>();
      for (size_t i = 0; i < acc.size(); ++i) {
        const auto m = static_cast<size_t>((static_cast<int64_t>(i) / spatial) % channels);
        const float multiplier = x_scale * static_cast<float>(w_scale[m]) / y_scale;
        const auto sum = static_cast<int32_t>(acc[i] + bias[m]);
        py[i] = requantize<Q>(sum, multiplier, y_zp);
      }
    }
  });
  return Status();
}

template <>
Status run_op(const ops::QLinearMatMul&, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  KILN_ASSIGN_OR_RETURN(MatMulParam a_scale, matmul_param(ctx, ctx.input(1), a.shape(), true));
  KILN_ASSIGN_OR_RETURN(MatMulParam a_zp, matmul_param(ctx, ctx.input(2), a.shape(), true));
  KILN_ASSIGN_OR_RETURN(MatMulParam b_scale, matmul_param(ctx, ctx.input(4), b.shape(), false));
  KILN_ASSIGN_OR_RETURN(MatMulParam b_zp, matmul_param(ctx, ctx.input(5), b.shape(), false));
  const float y_scale = ctx.input(6).data<float>()[0];
  const int64_t y_zp = tensor_to_ints(ctx.input(7)).at(0);
  Tensor& y = ctx.output(0);
  Status status;
  visit_dtype(y.dtype(), [&]<class Q>() {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
      Q* py = y.data<Q>();
      status = matmul_accumulate(
          ctx, a, b, a_zp, b_zp, [&](int64_t i, int64_t a_index, int64_t b_index, int64_t acc) {
            const auto sa =
                static_cast<float>(a_scale.values[static_cast<size_t>(a_scale.at(a_index))]);
            const auto sb =
                static_cast<float>(b_scale.values[static_cast<size_t>(b_scale.at(b_index))]);
            py[i] = requantize<Q>(static_cast<int32_t>(acc), sa * sb / y_scale, y_zp);
          });
    }
  });
  return status;
}

}  // namespace kiln::compiler::ref
