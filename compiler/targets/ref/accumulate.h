// SPDX-License-Identifier: Apache-2.0
// Accumulator types and conversions for ref kernels that sum or compare numeric elements.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "compiler/targets/ref/convert.h"
#include "core/dtype.h"

namespace kiln::compiler::ref {

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
