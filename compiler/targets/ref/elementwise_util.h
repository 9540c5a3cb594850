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

#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/ref_util.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace kiln::compiler::ref {

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <class T>
using Compute = std::conditional_t<kIsHalfLike<T>, float, T>;

// The unsigned type integer arithmetic on T wraps in (at least 32 bits, so that nothing promotes
// to a signed int and overflows).
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

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
