// SPDX-License-Identifier: Apache-2.0
// ref kernels for the elementwise op family's unary ops, activations, Clip and PRelu.
#include "compiler/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "compiler/targets/ref/elementwise_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

Status unsupported(const KernelContext& ctx, DType dtype) {
  return ctx.errorf("element type {} is not supported", dtype_name(dtype));
}

// y = f(x) for float inputs, computed in double. With `ints`, integer inputs are accepted too and
// the result is converted back (truncated, saturated).
template <class F>
Status math_unary(KernelContext& ctx, F f, bool ints = false) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      if (!kIsFloat<T> && !ints) return unsupported(ctx, x.dtype());
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = from_double<T>(f(to_double(in[i])));
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

// y = f(x) for numeric inputs, computed in Compute<T> (exact for integers).
template <class F>
Status numeric_unary(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = T(f(static_cast<Compute<T>>(in[i])));
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

// y = pred(x) as bool, for float inputs.
template <class F>
Status float_predicate(KernelContext& ctx, F pred) {
  const Tensor& x = ctx.input(0);
  bool* out = ctx.output(0).data<bool>();
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsFloat<T>) {
      const T* in = x.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = pred(to_double(in[i]));
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

// x * sigmoid(alpha * x) with each step rounded to T.
template <class T>
T swish_of(T x, float alpha) {
  const T ax = from_double<T>(static_cast<double>(alpha) * to_double(x));
  const T sigmoid = from_double<T>(1.0 / (1.0 + std::exp(-to_double(ax))));
  return from_double<T>(to_double(x) * to_double(sigmoid));
}

// -x, wrapping for the most negative integer.
template <class C>
C negate(C x) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    return static_cast<C>(Wrap<C>{0} - static_cast<Wrap<C>>(x));
  } else {
    return -x;
  }
}

}  // namespace

template <>
Status run_op(const ops::Abs&, KernelContext& ctx) {
  return numeric_unary(ctx, []<class C>(C x) -> C {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < 0 ? negate(x) : x;
    }
  });
}

template <>
Status run_op(const ops::Acos&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::acos(x); });
}

template <>
Status run_op(const ops::Acosh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::acosh(x); });
}

template <>
Status run_op(const ops::Asin&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::asin(x); });
}

template <>
Status run_op(const ops::Asinh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::asinh(x); });
}

template <>
Status run_op(const ops::Atan&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::atan(x); });
}

template <>
Status run_op(const ops::Atanh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::atanh(x); });
}

template <>
Status run_op(const ops::Ceil&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::ceil(x); });
}

template <>
Status run_op(const ops::Cos&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::cos(x); });
}

template <>
Status run_op(const ops::Cosh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::cosh(x); });
}

template <>
Status run_op(const ops::Erf&, KernelContext& ctx) {
  return math_unary(
      ctx, [](double x) { return std::erf(x); }, /*ints=*/true);
}

template <>
Status run_op(const ops::Exp&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::exp(x); });
}

template <>
Status run_op(const ops::Floor&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::floor(x); });
}

template <>
Status run_op(const ops::IsInf& op, KernelContext& ctx) {
  const bool neg = op.detect_negative != 0;
  const bool pos = op.detect_positive != 0;
  return float_predicate(ctx, [&](double x) { return std::isinf(x) && (x > 0 ? pos : neg); });
}

template <>
Status run_op(const ops::IsNaN&, KernelContext& ctx) {
  return float_predicate(ctx, [](double x) { return std::isnan(x); });
}

template <>
Status run_op(const ops::Log&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::log(x); });
}

template <>
Status run_op(const ops::Neg&, KernelContext& ctx) {
  return numeric_unary(ctx, []<class C>(C x) -> C { return negate(x); });
}

template <>
Status run_op(const ops::Not&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kBool) return unsupported(ctx, x.dtype());
  const bool* in = x.data<bool>();
  bool* out = ctx.output(0).data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = !in[i];
  return Status();
}

template <>
Status run_op(const ops::BitwiseNot&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsInt<T>) {
      const T* in = x.data<T>();
      T* out = ctx.output(0).data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = static_cast<T>(~in[i]);
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

template <>
Status run_op(const ops::Reciprocal&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return 1.0 / x; });
}

template <>
Status run_op(const ops::Relu&, KernelContext& ctx) {
  return numeric_unary(ctx, []<class C>(C x) -> C { return x < C(0) ? C(0) : x; });
}

template <>
Status run_op(const ops::Round&, KernelContext& ctx) {
  // nearbyint in the default rounding mode rounds halves to even, as ONNX asks.
  return math_unary(ctx, [](double x) { return std::nearbyint(x); });
}

template <>
Status run_op(const ops::Sigmoid&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) {
    if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
    const double e = std::exp(x);
    return e / (1.0 + e);
  });
}

template <>
Status run_op(const ops::Sign&, KernelContext& ctx) {
  return numeric_unary(ctx, []<class C>(C x) -> C {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>((C(0) < x) - (x < C(0)));
  });
}

template <>
Status run_op(const ops::Sin&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::sin(x); });
}

template <>
Status run_op(const ops::Sinh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::sinh(x); });
}

template <>
Status run_op(const ops::Sqrt&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::sqrt(x); });
}

template <>
Status run_op(const ops::Tan&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::tan(x); });
}

template <>
Status run_op(const ops::Tanh&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return std::tanh(x); });
}

template <>
Status run_op(const ops::Softplus&, KernelContext& ctx) {
  return math_unary(
      ctx, [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
}

template <>
Status run_op(const ops::Softsign&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return x / (1.0 + std::fabs(x)); });
}

template <>
Status run_op(const ops::Celu& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  return math_unary(ctx, [&](double x) {
    return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0));
  });
}

template <>
Status run_op(const ops::Elu& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  return math_unary(ctx, [&](double x) { return x < 0 ? alpha * (std::exp(x) - 1.0) : x; });
}

template <>
Status run_op(const ops::HardSigmoid& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  const double beta = op.beta;
  return math_unary(ctx, [&](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); });
}

template <>
Status run_op(const ops::HardSwish&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); });
}

template <>
Status run_op(const ops::Gelu& op, KernelContext& ctx) {
  if (op.approximate == "tanh") {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return math_unary(
        ctx, [&](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); });
  }
  return math_unary(ctx, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
}

template <>
Status run_op(const ops::Mish&, KernelContext& ctx) {
  return math_unary(ctx, [](double x) {
    const double softplus = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(softplus);
  });
}

// Swish and SwiGLU as their ONNX function bodies compute them: alpha * x, its Sigmoid and the
// product each rounded to the element type (which matters for f16 and bf16).
template <>
Status run_op(const ops::Swish& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsFloat<T>) {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = swish_of<T>(in[i], op.alpha);
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

template <>
Status run_op(const ops::SwiGLU& op, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  if (!(a.shape() == b.shape())) {
    return ctx.errorf("A {} and B {} must have one shape", a.shape().to_string(),
                      b.shape().to_string());
  }
  return visit_dtype(a.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsFloat<T>) {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < a.numel(); ++i) {
        out[i] = from_double<T>(to_double(swish_of<T>(pa[i], op.alpha)) * to_double(pb[i]));
      }
      return Status();
    } else {
      return unsupported(ctx, a.dtype());
    }
  });
}

template <>
Status run_op(const ops::LeakyRelu& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  return math_unary(ctx, [&](double x) { return x < 0 ? alpha * x : x; });
}

template <>
Status run_op(const ops::Selu& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  const double gamma = op.gamma;
  return math_unary(
      ctx, [&](double x) { return x > 0 ? gamma * x : gamma * (alpha * std::exp(x) - alpha); });
}

template <>
Status run_op(const ops::Shrink& op, KernelContext& ctx) {
  const double bias = op.bias;
  const double lambd = op.lambd;
  return math_unary(
      ctx,
      [&](double x) {
        if (x < -lambd) return x + bias;
        if (x > lambd) return x - bias;
        return 0.0;
      },
      /*ints=*/true);
}

template <>
Status run_op(const ops::ThresholdedRelu& op, KernelContext& ctx) {
  const double alpha = op.alpha;
  return math_unary(ctx, [&](double x) { return x > alpha ? x : 0.0; });
}

template <>
Status run_op(const ops::Clip&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      using C = Compute<T>;
      std::optional<C> lo, hi;
      for (int i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        const Tensor& b = ctx.input(i);
        if (b.dtype() != x.dtype() || b.numel() != 1) {
          return ctx.errorf("input {} must be a scalar of type {}", i, dtype_name(x.dtype()));
        }
        (i == 1 ? lo : hi) = static_cast<C>(b.data<T>()[0]);
      }
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        C v = static_cast<C>(in[i]);
        if (lo && v < *lo) v = *lo;
        if (hi && v > *hi) v = *hi;
        out[i] = T(v);
      }
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

template <>
Status run_op(const ops::PRelu&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  Tensor& y = ctx.output(0);
  return visit_dtype(x.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      if (slope.dtype() != x.dtype()) return unsupported(ctx, slope.dtype());
      const T* px = x.data<T>();
      const T* ps = slope.data<T>();
      T* out = y.data<T>();
      for_each_broadcast(y.shape(), x.shape(), slope.shape(),
                         [&](int64_t o, int64_t ix, int64_t is) {
                           const double v = to_double(px[ix]);
                           out[o] = v < 0 ? from_double<T>(v * to_double(ps[is])) : px[ix];
                         });
      return Status();
    } else {
      return unsupported(ctx, x.dtype());
    }
  });
}

}  // namespace kiln::compiler::ref
