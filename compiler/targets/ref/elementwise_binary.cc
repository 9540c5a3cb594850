// SPDX-License-Identifier: Apache-2.0
// ref kernels for the elementwise op family's broadcasting ops: arithmetic, logic, comparisons,
// the variadic Max/Min/Mean/Sum, and Where.
#include <cmath>

#include "compiler/ops/elementwise.h"
#include "compiler/targets/ref/elementwise_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

Status unsupported(const KernelContext& ctx, DType dtype) {
  return ctx.errorf("element type {} is not supported", dtype_name(dtype));
}

// out[o] = f(a[ia], b[ib]) over the broadcast of a and b (both of element type T).
template <class T, class R, class F>
void broadcast_binary(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  for_each_broadcast(out.shape(), a.shape(), b.shape(),
                     [&](int64_t o, int64_t ia, int64_t ib) { po[o] = f(pa[ia], pb[ib]); });
}

// Elementwise arithmetic on numbers: floats in Compute<T>; integers by `int_op` on the wrapping
// unsigned type (add, sub, mul) or by `int_op` on T itself.
template <class FloatOp, class IntOp>
Status arithmetic(KernelContext& ctx, FloatOp float_op, IntOp int_op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return unsupported(ctx, b.dtype());
  Status status;
  visit_dtype(a.dtype(), [&]<class T>() {
    if constexpr (kIsFloat<T>) {
      broadcast_binary<T, T>(a, b, ctx.output(0), [&](T x, T y) {
        return T(float_op(static_cast<Compute<T>>(x), static_cast<Compute<T>>(y)));
      });
    } else if constexpr (kIsInt<T>) {
      broadcast_binary<T, T>(a, b, ctx.output(0), [&](T x, T y) { return int_op(x, y, status); });
    } else {
      status = unsupported(ctx, a.dtype());
    }
  });
  if (!status.ok()) return ctx.error(status.message());
  return Status();
}

template <class T>
T wrap_add(T x, T y) {
  return static_cast<T>(static_cast<Wrap<T>>(x) + static_cast<Wrap<T>>(y));
}
template <class T>
T wrap_sub(T x, T y) {
  return static_cast<T>(static_cast<Wrap<T>>(x) - static_cast<Wrap<T>>(y));
}
template <class T>
T wrap_mul(T x, T y) {
  return static_cast<T>(static_cast<Wrap<T>>(x) * static_cast<Wrap<T>>(y));
}

// C's integer division (truncating toward zero); INT_MIN / -1 wraps to INT_MIN.
template <class T>
T int_div(T x, T y, Status& status) {
  if (y == 0) {
    status = invalid_argument_error("integer division by zero");
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return static_cast<T>(Wrap<T>{0} - static_cast<Wrap<T>>(x));
  }
  return static_cast<T>(x / y);
}

// The remainder with the sign of the dividend (C's %, fmod=1) or of the divisor (Python's %).
template <class T>
T int_mod(T x, T y, bool sign_of_divisor, Status& status) {
  if (y == 0) {
    status = invalid_argument_error("integer modulo by zero");
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return 0;
    T r = static_cast<T>(x % y);
    if (sign_of_divisor && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
    return r;
  } else {
    return static_cast<T>(x % y);
  }
}

// base^exp for an integer base and integer exponent, wrapping like repeated multiplication.
template <class T>
T int_pow(T base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (exp & 1) != 0 ? T(-1) : T(1);
    }
    return 0;
  }
  T result = 1;
  while (exp > 0) {
    if ((exp & 1) != 0) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return result;
}

// A comparison producing bool; 16-bit floats compare as float.
template <class F>
Status comparison(KernelContext& ctx, F cmp, bool allow_non_numbers = false) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return unsupported(ctx, b.dtype());
  return visit_dtype(a.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      broadcast_binary<T, bool>(a, b, ctx.output(0), [&](T x, T y) {
        return cmp(static_cast<Compute<T>>(x), static_cast<Compute<T>>(y));
      });
      return Status();
    } else {
      if (!allow_non_numbers) return unsupported(ctx, a.dtype());
      broadcast_binary<T, bool>(a, b, ctx.output(0),
                                [&](const T& x, const T& y) { return cmp(x, y); });
      return Status();
    }
  });
}

template <class F>
Status logical(KernelContext& ctx, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::kBool) return unsupported(ctx, a.dtype());
  if (b.dtype() != DType::kBool) return unsupported(ctx, b.dtype());
  broadcast_binary<bool, bool>(a, b, ctx.output(0), [&](bool x, bool y) { return f(x, y); });
  return Status();
}

// Folds every input into the output: out = in0 broadcast, then out = f(out, in_k).
template <class F>
Status variadic(KernelContext& ctx, F f) {
  Tensor& out = ctx.output(0);
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k)) return ctx.errorf("input {} is required", k);
    if (ctx.input(k).dtype() != out.dtype()) return unsupported(ctx, ctx.input(k).dtype());
  }
  return visit_dtype(out.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      T* po = out.data<T>();
      const Tensor& first = ctx.input(0);
      const T* p0 = first.data<T>();
      for_each_broadcast(out.shape(), first.shape(), out.shape(),
                         [&](int64_t o, int64_t i0, int64_t) { po[o] = p0[i0]; });
      for (int k = 1; k < ctx.num_inputs(); ++k) {
        const Tensor& in = ctx.input(k);
        const T* pk = in.data<T>();
        for_each_broadcast(
            out.shape(), out.shape(), in.shape(), [&](int64_t o, int64_t, int64_t ik) {
              po[o] = T(f(static_cast<Compute<T>>(po[o]), static_cast<Compute<T>>(pk[ik])));
            });
      }
      return Status();
    } else {
      return unsupported(ctx, out.dtype());
    }
  });
}

template <class C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

}  // namespace

template <>
Status run_op(const ops::Add&, KernelContext& ctx) {
  return arithmetic(
      ctx, [](auto x, auto y) { return x + y; },
      []<class T>(T x, T y, Status&) { return wrap_add(x, y); });
}

template <>
Status run_op(const ops::Sub&, KernelContext& ctx) {
  return arithmetic(
      ctx, [](auto x, auto y) { return x - y; },
      []<class T>(T x, T y, Status&) { return wrap_sub(x, y); });
}

template <>
Status run_op(const ops::Mul&, KernelContext& ctx) {
  return arithmetic(
      ctx, [](auto x, auto y) { return x * y; },
      []<class T>(T x, T y, Status&) { return wrap_mul(x, y); });
}

template <>
Status run_op(const ops::Div&, KernelContext& ctx) {
  return arithmetic(
      ctx, [](auto x, auto y) { return x / y; },
      []<class T>(T x, T y, Status& s) { return int_div(x, y, s); });
}

template <>
Status run_op(const ops::Mod& op, KernelContext& ctx) {
  // fmod=0 is Python's (numpy's) remainder, with the sign of the divisor, for floats too.
  const bool python = op.fmod == 0;
  return arithmetic(
      ctx,
      [&](auto x, auto y) {
        auto r = std::fmod(x, y);
        if (python && r != 0 && (r < 0) != (y < 0)) r += y;
        return r;
      },
      [&]<class T>(T x, T y, Status& s) { return int_mod(x, y, python, s); });
}

template <>
Status run_op(const ops::Pow&, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  return visit_dtype(a.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsNumeric<T>) {
      return visit_dtype(b.dtype(), [&]<class U>() -> Status {
        if constexpr (kIsNumeric<U>) {
          const T* pa = a.data<T>();
          const U* pb = b.data<U>();
          T* po = out.data<T>();
          for_each_broadcast(
              out.shape(), a.shape(), b.shape(), [&](int64_t o, int64_t ia, int64_t ib) {
                if constexpr (kIsInt<T> && kIsInt<U>) {
                  int64_t e = 0;
                  if constexpr (std::is_unsigned_v<U> && sizeof(U) == 8) {
                    e = pb[ib] > static_cast<U>(INT64_MAX) ? INT64_MAX
                                                           : static_cast<int64_t>(pb[ib]);
                  } else {
                    e = static_cast<int64_t>(pb[ib]);
                  }
                  po[o] = int_pow(pa[ia], e);
                } else {
                  po[o] = from_double<T>(std::pow(to_double(pa[ia]), to_double(pb[ib])));
                }
              });
          return Status();
        } else {
          return unsupported(ctx, b.dtype());
        }
      });
    } else {
      return unsupported(ctx, a.dtype());
    }
  });
}

template <>
Status run_op(const ops::And&, KernelContext& ctx) {
  return logical(ctx, [](bool x, bool y) { return x && y; });
}

template <>
Status run_op(const ops::Or&, KernelContext& ctx) {
  return logical(ctx, [](bool x, bool y) { return x || y; });
}

template <>
Status run_op(const ops::Xor&, KernelContext& ctx) {
  return logical(ctx, [](bool x, bool y) { return x != y; });
}

template <>
Status run_op(const ops::Equal&, KernelContext& ctx) {
  return comparison(
      ctx, [](const auto& x, const auto& y) { return x == y; }, /*allow_non_numbers=*/true);
}

template <>
Status run_op(const ops::Greater&, KernelContext& ctx) {
  return comparison(ctx, [](auto x, auto y) { return x > y; });
}

template <>
Status run_op(const ops::GreaterOrEqual&, KernelContext& ctx) {
  return comparison(ctx, [](auto x, auto y) { return x >= y; });
}

template <>
Status run_op(const ops::Less&, KernelContext& ctx) {
  return comparison(ctx, [](auto x, auto y) { return x < y; });
}

template <>
Status run_op(const ops::LessOrEqual&, KernelContext& ctx) {
  return comparison(ctx, [](auto x, auto y) { return x <= y; });
}

template <>
Status run_op(const ops::BitShift& op, KernelContext& ctx) {
  const bool left = op.direction && *op.direction == "LEFT";
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return unsupported(ctx, b.dtype());
  return visit_dtype(a.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsInt<T>) {
      // Shifts by a negative amount or past the width (undefined in C) shift every bit out: left
      // gives 0, right the sign fill (right shifts of signed values are arithmetic).
      constexpr T kWidth = static_cast<T>(sizeof(T) * 8);
      broadcast_binary<T, T>(a, b, ctx.output(0), [&](T x, T s) -> T {
        bool out_of_range = s >= kWidth;
        T fill = 0;
        if constexpr (std::is_signed_v<T>) {
          out_of_range |= s < 0;
          if (!left && x < 0) fill = -1;
        }
        if (out_of_range) return fill;
        return static_cast<T>(left ? static_cast<Wrap<T>>(x) << s : x >> s);
      });
      return Status();
    } else {
      return unsupported(ctx, a.dtype());
    }
  });
}

namespace {

// z = f(x, y) on the bits of same-typed integers, broadcast.
template <class F>
Status bitwise(KernelContext& ctx, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return unsupported(ctx, b.dtype());
  return visit_dtype(a.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsInt<T>) {
      broadcast_binary<T, T>(a, b, ctx.output(0), [&](T x, T y) { return static_cast<T>(f(x, y)); });
      return Status();
    } else {
      return unsupported(ctx, a.dtype());
    }
  });
}

}  // namespace

template <>
Status run_op(const ops::BitwiseAnd&, KernelContext& ctx) {
  return bitwise(ctx, [](auto x, auto y) { return x & y; });
}

template <>
Status run_op(const ops::BitwiseOr&, KernelContext& ctx) {
  return bitwise(ctx, [](auto x, auto y) { return x | y; });
}

template <>
Status run_op(const ops::BitwiseXor&, KernelContext& ctx) {
  return bitwise(ctx, [](auto x, auto y) { return x ^ y; });
}

template <>
Status run_op(const ops::Max&, KernelContext& ctx) {
  return variadic(ctx, []<class C>(C x, C y) -> C { return is_nan(x) || x > y ? x : y; });
}

template <>
Status run_op(const ops::Min&, KernelContext& ctx) {
  return variadic(ctx, []<class C>(C x, C y) -> C { return is_nan(x) || x < y ? x : y; });
}

template <>
Status run_op(const ops::Sum&, KernelContext& ctx) {
  return variadic(ctx, []<class C>(C x, C y) -> C {
    if constexpr (std::is_integral_v<C>) {
      return wrap_add(x, y);
    } else {
      return x + y;
    }
  });
}

template <>
Status run_op(const ops::Mean&, KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(run_op(ops::Sum{}, ctx));
  Tensor& out = ctx.output(0);
  const double n = ctx.num_inputs();
  return visit_dtype(out.dtype(), [&]<class T>() -> Status {
    if constexpr (kIsFloat<T>) {
      T* po = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) po[i] = from_double<T>(to_double(po[i]) / n);
      return Status();
    } else {
      return unsupported(ctx, out.dtype());
    }
  });
}

template <>
Status run_op(const ops::Where&, KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  Tensor& out = ctx.output(0);
  if (cond.dtype() != DType::kBool) return unsupported(ctx, cond.dtype());
  if (x.dtype() != y.dtype() || x.dtype() != out.dtype()) return unsupported(ctx, y.dtype());
  visit_dtype(x.dtype(), [&]<class T>() {
    const bool* pc = cond.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    for_each_broadcast_n(out.shape(), {cond.shape(), x.shape(), y.shape()},
                         [&](int64_t o, const std::vector<int64_t>& at) {
                           po[o] = pc[at[0]] ? px[at[1]] : py[at[2]];
                         });
  });
  return Status();
}

}  // namespace kiln::compiler::ref
