// SPDX-License-Identifier: Apache-2.0
// Element-type classes and exact conversions shared by the ref kernels: every kernel that computes
// in double stores through these, so rounding and saturation are the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

template <class T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// ONNX's narrow types (core/float8.h, core/int4.h): converted (to_double, from_double), never
// computed with. They are in none of the classes below, so arithmetic kernels refuse them.
template <class T>
struct IsNarrowFloat : std::false_type {};
template <NarrowFloatKind K>
struct IsNarrowFloat<NarrowFloat<K>> : std::true_type {};
template <class T>
inline constexpr bool kIsNarrowFloat = IsNarrowFloat<T>::value;
template <class T>
struct IsSmallInt : std::false_type {};
template <int Bits, bool Signed>
struct IsSmallInt<SmallInt<Bits, Signed>> : std::true_type {};
template <class T>
inline constexpr bool kIsSmallInt = IsSmallInt<T>::value;
template <class T>
inline constexpr bool kIsNarrow = kIsNarrowFloat<T> || kIsSmallInt<T>;
template <class T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalfLike<T>;
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
// Numbers: floats and integers (not bool, not string).
template <class T>
inline constexpr bool kIsNumeric = kIsFloat<T> || kIsInt<T>;

// A numeric, bool or narrow element as double (exact).
template <class T>
double to_double(T v) {
  if constexpr (kIsHalfLike<T> || kIsNarrowFloat<T>) {
    return static_cast<double>(static_cast<float>(v));
  } else if constexpr (kIsSmallInt<T>) {
    return static_cast<double>(v.value());
  } else {
    return static_cast<double>(v);
  }
}

// A double rounded to float with "round to odd", so that a second rounding to a 16-bit float gives
// the correctly rounded result (no double-rounding error).
inline float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    f = kiln::detail::bits_float(kiln::detail::float_bits(f) | 1u);
  }
  return f;
}

// A double as an integer type, saturated at the type's range, NaN to 0 (C leaves these undefined).
// `v` must already be integral-valued or is truncated toward zero.
template <class To>
To saturate_to_int(double v) {
  if (std::isnan(v)) return To{0};
  if (v <= static_cast<double>(std::numeric_limits<To>::lowest())) {
    return std::numeric_limits<To>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<To>::max())) {
    return std::numeric_limits<To>::max();
  }
  return static_cast<To>(v);
}

// How a double becomes an integer element.
enum class IntRounding : uint8_t {
  kTruncate,     // toward zero, as C casts and ONNX Cast do
  kNearestEven,  // round half to even, as pooling and resampling of integer images do
};

// A double as element type T: floats round to nearest (once, also for f16/bf16 and the narrow
// floats, which saturate as ONNX Cast's `saturate` says), integers round as `rounding` says and
// saturate, but the 4- and 2-bit ones wrap (as ONNX Cast does: the low bits of the int64), bool is
// v != 0.
template <class T>
T from_double(double v, IntRounding rounding = IntRounding::kTruncate, bool saturate = true) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (kIsNarrowFloat<T>) {
    return T::from_double(v, saturate);
  } else if constexpr (kIsSmallInt<T>) {
    return T::wrap(
        saturate_to_int<int64_t>(rounding == IntRounding::kNearestEven ? std::nearbyint(v) : v));
  } else if constexpr (kIsHalfLike<T>) {
    return T(round_to_odd_float(v));
  } else if constexpr (kIsFloat<T>) {
    return static_cast<T>(v);
  } else {
    return saturate_to_int<T>(rounding == IntRounding::kNearestEven ? std::nearbyint(v) : v);
  }
}

// Stores `values` (exactly numel of them) into the numeric or bool tensor `out`.
inline void store_doubles(std::span<const double> values, Tensor& out,
                          IntRounding rounding = IntRounding::kTruncate) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == out.numel(), "store_doubles: size mismatch");
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) {
      KILN_CHECK(false, "store_doubles into a string tensor");
    } else {
      T* p = out.data<T>();
      for (size_t i = 0; i < values.size(); ++i) p[i] = from_double<T>(values[i], rounding);
    }
  });
}

}  // namespace kiln::compiler::ref
