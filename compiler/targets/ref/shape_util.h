// SPDX-License-Identifier: Apache-2.0
// Data-movement helpers for ref kernels that rearrange elements without computing on them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/targets/ref/ref_util.h"
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
  for_each_index(std::span<const int64_t>(shape.dims()), std::forward<F>(f));
}

}  // namespace kiln::compiler::ref
