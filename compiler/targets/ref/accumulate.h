// SPDX-License-Identifier: Apache-2.0
// Accumulator types and conversions for ref kernels that sum or compare numeric elements.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/dtype.h"

namespace kiln::compiler::ref {

// Element types a numeric kernel handles: everything but bool and string.
template <class T>
inline constexpr bool kIsNumeric = !std::is_same_v<T, bool> && !std::is_same_v<T, std::string>;

template <class T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// What T accumulates in: double for floating types (sums are exact enough to round once), int64_t
// or uint64_t for integers, where arithmetic wraps like the narrow type would.
template <class T>
using acc_t = std::conditional_t<kIsFloat<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

template <class T>
acc_t<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<acc_t<T>>(v);
  }
}

// The accumulator value as T: rounded for floating types, wrapped (modulo) for integers.
template <class T>
T from_acc(acc_t<T> v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// A double as T: rounded for floating types; for integers truncated and saturated (NaN gives 0).
template <class T>
T from_double(double v) {
  if constexpr (kIsFloat<T>) {
    return from_acc<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Wrapping integer arithmetic (no signed overflow), plain arithmetic for double.
template <class A>
A acc_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}
template <class A>
A acc_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}
template <class A>
A acc_abs(A a) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::fabs(a);
  } else if constexpr (std::is_signed_v<A>) {
    return a < 0 ? static_cast<A>(0 - static_cast<uint64_t>(a)) : a;
  } else {
    return a;
  }
}
template <class A>
bool acc_isnan(A a) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::isnan(a);
  } else {
    return false;
  }
}

}  // namespace kiln::compiler::ref
