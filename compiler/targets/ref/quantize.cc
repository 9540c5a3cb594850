// SPDX-License-Identifier: Apache-2.0
// ref kernels for the quantize op family: plain loops, the executable specification.
#include "compiler/ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/quantize_util.h"

namespace kiln::compiler::ref {

namespace {

// Which scale and zero point element i of x uses: the only one, the one of its slice along the
// axis, or (blocked quantization) the one of its block along the axis.
struct ParamIndex {
  bool per_tensor = true;
  int64_t inner = 1;  // elements after the axis
  int64_t dim = 1;    // x's extent along the axis
  int64_t count = 1;  // the parameters' extent along the axis
  int64_t block = 0;  // elements per block; 0 when not blocked

  int64_t operator()(int64_t i) const {
    if (per_tensor) return 0;
    const int64_t a = (i / inner) % dim;
    if (block == 0) return a;
    const int64_t outer = i / (inner * dim);
    return (outer * count + a / block) * inner + i % inner;
  }
};

Result<ParamIndex> param_index(const KernelContext& ctx, const Shape& x, const Shape& params,
                               int64_t axis, std::optional<int64_t> block) {
  const int64_t block_size = block.value_or(0);
  ParamIndex p;
  if (params.numel() == 1) return p;
  KILN_ASSIGN_OR_RETURN(int a, normalize_axis(axis, x.rank()));
  p.per_tensor = false;
  p.inner = x.numel(a + 1, x.rank());
  p.dim = x[a];
  if (block_size <= 0) {
    if (params.rank() != 1 || params[0] != x[a]) {
      return ctx.errorf("expected {} scale and zero point values along axis {}, got shape {}", x[a],
                        axis, params.to_string());
    }
    p.count = x[a];
    return p;
  }
  bool fits = params.rank() == x.rank();
  for (int d = 0; fits && d < x.rank(); ++d) {
    fits = params[d] == (d == a ? (x[d] + block_size - 1) / block_size : x[d]);
  }
  if (!fits) {
    return ctx.errorf("scales of shape {} do not fit x {} in blocks of {} along axis {}",
                      params.to_string(), x.to_string(), block_size, axis);
  }
  p.count = params[a];
  p.block = block_size;
  return p;
}

// Every element of a numeric or narrow tensor as a double (exact, except i64/u64 past 2^53).
std::vector<double> doubles_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = to_double(p[i]);
    }
  });
  return out;
}

// v rounded to the float type `p` (f16, bf16, f32; f64 keeps it), as a double.
double round_to(DType p, double v) {
  switch (p) {
    case DType::kF16: return to_double(from_double<Half>(v));
    case DType::kBF16: return to_double(from_double<BFloat16>(v));
    case DType::kF32: return static_cast<double>(static_cast<float>(v));
    default: return v;
  }
}

}  // namespace

// y = saturate(round(x / scale) + zero_point). The division is done in `precision`, else in the
// scale's type (f32 for an e8m0 scale), except that integer x divided by an f32 or i32 scale uses
// double (kiln's behaviour before opset 23, which ONNX's reference matches).
template <>
Status run_op(const ops::QuantizeLinear& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(ParamIndex at,
                        param_index(ctx, x.shape(), scale.shape(), op.axis, op.block_size));
  const std::vector<double> xs = doubles_of(x);
  const std::vector<double> ss = doubles_of(scale);
  const std::vector<double> zp =
      ctx.has_input(2) ? doubles_of(ctx.input(2)) : std::vector<double>(ss.size(), 0.0);
  if (zp.size() != ss.size()) {
    return ctx.errorf("y_zero_point has {} values, y_scale has {}", zp.size(), ss.size());
  }
  DType precision = op.precision.value_or(scale.dtype());
  if (!op.precision && (scale.dtype() == DType::kF8E8M0 || scale.dtype() == DType::kI32)) {
    precision = DType::kF32;
  }
  if (!op.precision && dtype_is_integer(x.dtype()) &&
      (scale.dtype() == DType::kF32 || scale.dtype() == DType::kI32)) {
    precision = DType::kF64;
  }
  Tensor& y = ctx.output(0);
  Status status;
  visit_dtype(y.dtype(), [&]<class Q>() {
    if constexpr (kIsInt<Q> || kIsSmallInt<Q> || kIsNarrowFloat<Q>) {
      Q* py = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const auto c = static_cast<size_t>(at(i));
        const double q = round_to(precision, round_to(precision, xs[static_cast<size_t>(i)]) /
                                                 round_to(precision, ss[c]));
        if constexpr (kIsNarrowFloat<Q>) {
          py[i] =
              from_double<Q>(q + zp[c], IntRounding::kNearestEven, op.saturate.value_or(1) != 0);
        } else {
          py[i] = saturate_round<Q>(q, static_cast<int64_t>(zp[c]));
        }
      }
    } else {
      status = ctx.errorf("unsupported output type {}", dtype_name(y.dtype()));
    }
  });
  return status;
}

// y = (x - zero_point) * scale, in f32 (x - zero_point exact for every integer type but i32),
// then rounded to the output type.
template <>
Status run_op(const ops::DequantizeLinear& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(ParamIndex at,
                        param_index(ctx, x.shape(), scale.shape(), op.axis, op.block_size));
  const std::vector<double> ss = doubles_of(scale);
  const std::vector<double> zp =
      ctx.has_input(2) ? doubles_of(ctx.input(2)) : std::vector<double>(ss.size(), 0.0);
  if (zp.size() != ss.size()) {
    return ctx.errorf("x_zero_point has {} values, x_scale has {}", zp.size(), ss.size());
  }
  const std::vector<double> xs = doubles_of(x);
  std::vector<double> ys(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto c = static_cast<size_t>(at(static_cast<int64_t>(i)));
    const auto dx = static_cast<float>(xs[i] - zp[c]);
    ys[i] = static_cast<double>(dx * static_cast<float>(ss[c]));
  }
  store_doubles(ys, ctx.output(0));
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
  const bool silu = op.activation == "SiLU";
  if (op.activation && !silu) return ctx.errorf("unknown fused activation \"{}\"", *op.activation);
  const std::vector<int64_t> acc = conv_accumulate(x, w, x_zp, w_zp, op.group, g);
  Tensor& y = ctx.output(0);
  const int64_t spatial = y.shape().numel(2, y.rank());
  visit_dtype(y.dtype(), [&]<class Q>() {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
      Q* py = y.data<Q>();
      for (size_t i = 0; i < acc.size(); ++i) {
        const auto m = static_cast<size_t>((static_cast<int64_t>(i) / spatial) % channels);
        const auto sum = static_cast<int32_t>(acc[i] + bias[m]);
        if (silu) {
          // The float graph it replaces: the real result, its SiLU, then QuantizeLinear.
          const float real = static_cast<float>(sum) * (x_scale * static_cast<float>(w_scale[m]));
          const float act = real / (1.0f + std::exp(-real));
          py[i] = quantize_value<Q>(act, y_scale, y_zp);
        } else {
          const float multiplier = x_scale * static_cast<float>(w_scale[m]) / y_scale;
          py[i] = requantize<Q>(sum, multiplier, y_zp);
        }
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
  const auto y_scale = static_cast<float>(tensor_to_doubles(ctx.input(6)).at(0));
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
