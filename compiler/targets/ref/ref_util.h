// SPDX-License-Identifier: Apache-2.0
// Helpers shared by ref kernels: index arithmetic for broadcasting and strided walks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/shape.h"

namespace kiln::compiler::ref {

// Element strides of `in` as seen from the broadcast `out` shape: 0 on broadcast dims, and the
// leading dims `in` lacks.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Calls f(out_index, a_index, b_index) for every element of `out`, the broadcast of `a` and `b`.
template <class F>
void for_each_broadcast(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const int rank = out.rank();
  const std::vector<int64_t> sa = broadcast_strides(a, out);
  const std::vector<int64_t> sb = broadcast_strides(b, out);
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  const int64_t n = out.numel();
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < n; ++o) {
    f(o, ia, ib);
    for (int d = rank - 1; d >= 0; --d) {
      auto du = static_cast<size_t>(d);
      ++index[du];
      ia += sa[du];
      ib += sb[du];
      if (index[du] < out[d]) break;
      ia -= sa[du] * index[du];
      ib -= sb[du] * index[du];
      index[du] = 0;
    }
  }
}

// Calls f(index) for every multi-index of `dims` in row-major order (none when a dim is 0).
template <class F>
void for_each_index(std::span<const int64_t> dims, F&& f) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    f(static_cast<const std::vector<int64_t>&>(index));
    for (size_t a = dims.size(); a-- > 0;) {
      if (++index[a] < dims[a]) break;
      index[a] = 0;
    }
  }
}

// Converts a flat row-major offset into a multi-index of `shape`.
std::vector<int64_t> unravel_index(int64_t offset, const Shape& shape);
// Converts a multi-index into a flat row-major offset.
int64_t ravel_index(const std::vector<int64_t>& index, const Shape& shape);

}  // namespace kiln::compiler::ref
