// SPDX-License-Identifier: Apache-2.0
// Data-movement helpers for ref kernels that rearrange elements without computing on them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

// Fills `dst` in row-major order over `shape` (whose element count is dst's): the element at
// multi-index idx is src[offset + sum_d idx[d] * strides[d]]. Strides may be 0 (broadcast) or
// negative (reversal); src and dst must share a dtype.
void strided_copy(const Tensor& src, int64_t offset, std::span<const int64_t> strides,
                  const Shape& shape, Tensor& dst);

// Copies `count` elements from src[src_begin..] to dst[dst_begin..] (same dtype).
void copy_elements(const Tensor& src, int64_t src_begin, Tensor& dst, int64_t dst_begin,
                   int64_t count);

// Calls f(index) for every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = shape.numel();
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()), 0);
  for (int64_t o = 0; o < n; ++o) {
    f(static_cast<const std::vector<int64_t>&>(index));
    for (int d = shape.rank() - 1; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < shape[d]) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
}

}  // namespace kiln::compiler::ref
