// SPDX-License-Identifier: Apache-2.0
// Helpers for ref kernels that compute in double and store into any numeric element type.
#pragma once

#include <span>
#include <string>
#include <type_traits>

#include "core/tensor.h"

namespace kiln::compiler::ref {

// `v` converted to the numeric element type T (Half and BFloat16 round through float; bool is
// v != 0). Integer conversion truncates; out-of-range values are the caller's concern.
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Stores `values` (numel of them) into the numeric tensor `out`, converting each element.
inline void store_doubles(Tensor& out, std::span<const double> values) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == out.numel(), "store_doubles: size mismatch");
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      T* p = out.data<T>();
      for (size_t i = 0; i < values.size(); ++i) p[i] = from_double<T>(values[i]);
    } else {
      KILN_CHECK(false, "store_doubles into a string tensor");
    }
  });
}

}  // namespace kiln::compiler::ref
