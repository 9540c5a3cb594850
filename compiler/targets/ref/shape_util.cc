// SPDX-License-Identifier: Apache-2.0
// Data-movement helpers for ref kernels that rearrange elements without computing on them.
#include "compiler/targets/ref/shape_util.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::compiler::ref {

void strided_copy(const Tensor& src, int64_t offset, std::span<const int64_t> strides,
                  const Shape& shape, Tensor& dst) {
  KILN_CHECK(src.dtype() == dst.dtype(), "strided_copy: dtype mismatch");
  KILN_CHECK(shape.numel() == dst.numel(), "strided_copy: size mismatch");
  KILN_CHECK(static_cast<int>(strides.size()) == shape.rank(), "strided_copy: rank mismatch");
  const int rank = shape.rank();
  const int64_t n = shape.numel();
  visit_dtype(src.dtype(), [&]<class T>() {
    const T* in = src.data<T>();
    T* out = dst.data<T>();
    std::vector<int64_t> index(static_cast<size_t>(rank), 0);
    int64_t at = offset;
    for (int64_t o = 0; o < n; ++o) {
      out[o] = in[at];
      for (int d = rank - 1; d >= 0; --d) {
        auto du = static_cast<size_t>(d);
        at += strides[du];
        if (++index[du] < shape[d]) break;
        at -= strides[du] * index[du];
        index[du] = 0;
      }
    }
  });
}

void copy_elements(const Tensor& src, int64_t src_begin, Tensor& dst, int64_t dst_begin,
                   int64_t count) {
  KILN_CHECK(src.dtype() == dst.dtype(), "copy_elements: dtype mismatch");
  if (count <= 0) return;
  visit_dtype(src.dtype(), [&]<class T>() {
    const T* in = src.data<T>() + src_begin;
    std::copy(in, in + count, dst.data<T>() + dst_begin);
  });
}

}  // namespace kiln::compiler::ref
