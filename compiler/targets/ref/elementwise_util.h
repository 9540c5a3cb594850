// SPDX-License-Identifier: Apache-2.0
// Element-type helpers for the elementwise ref kernels: type classes, exact conversions, N-way
// broadcast.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/targets/ref/ref_util.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace kiln::compiler::ref {

template <class T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalfLike<T>;
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool kIsNumber = kIsFloat<T> || kIsInt<T>;

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <class T>
using Compute = std::conditional_t<kIsHalfLike<T>, float, T>;

// The unsigned type integer arithmetic on T wraps in (at least 32 bits, so that nothing promotes
// to a signed int and overflows).
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

// A float or double converted to an integer type: truncated toward zero, saturated at the type's
// range, NaN to 0 (C leaves these undefined).
template <class To>
To saturate_to_int(double v) {
  if (std::isnan(v)) return To{0};
  if (v <= static_cast<double>(std::numeric_limits<To>::lowest()))
    return std::numeric_limits<To>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<To>::max()))
    return std::numeric_limits<To>::max();
  return static_cast<To>(v);
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

// A double as element type T (floats rounded to nearest, integers saturated).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (kIsHalfLike<T>) {
    return T(round_to_odd_float(v));
  } else if constexpr (kIsFloat<T>) {
    return static_cast<T>(v);
  } else {
    return saturate_to_int<T>(v);
  }
}

// Element value as double (numbers and bool).
template <class T>
double to_double(const T& v) {
  return static_cast<double>(static_cast<Compute<T>>(v));
}

// Calls f(out_offset, offsets) for every element of `out`, the broadcast of `inputs`, where
// offsets[k] is the element of input k that lines up with it.
template <class F>
void for_each_broadcast_n(const Shape& out, const std::vector<Shape>& inputs, F&& f) {
  const int rank = out.rank();
  const size_t n = inputs.size();
  std::vector<std::vector<int64_t>> strides;
  strides.reserve(n);
  for (const Shape& s : inputs) strides.push_back(broadcast_strides(s, out));
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  std::vector<int64_t> offsets(n, 0);
  const int64_t total = out.numel();
  for (int64_t o = 0; o < total; ++o) {
    f(o, offsets);
    for (int d = rank - 1; d >= 0; --d) {
      auto du = static_cast<size_t>(d);
      ++index[du];
      for (size_t k = 0; k < n; ++k) offsets[k] += strides[k][du];
      if (index[du] < out[d]) break;
      for (size_t k = 0; k < n; ++k) offsets[k] -= strides[k][du] * index[du];
      index[du] = 0;
    }
  }
}

}  // namespace kiln::compiler::ref
