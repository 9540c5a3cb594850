// SPDX-License-Identifier: Apache-2.0
// Tensor slicing and joining along one axis.
#include "compiler/targets/ref/control_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::compiler::ref {

void copy_elements(const Tensor& src, int64_t src_offset, const Tensor& dst, int64_t dst_offset,
                   int64_t count) {
  KILN_CHECK(src.dtype() == dst.dtype(), "copy_elements: dtype mismatch");
  KILN_CHECK(src_offset + count <= src.numel() && dst_offset + count <= dst.numel(),
             "copy_elements: out of range");
  visit_dtype(src.dtype(), [&]<class T>() {
    const T* from = src.data<T>() + src_offset;
    std::copy(from, from + count, dst.data<T>() + dst_offset);
  });
}

Result<Tensor> slice_axis(const Tensor& x, int axis, int64_t begin, int64_t end) {
  const Shape& shape = x.shape();
  KILN_CHECK(axis >= 0 && axis < shape.rank() && 0 <= begin && begin <= end && end <= shape[axis],
             "slice_axis: out of range");
  Shape out_shape = shape;
  out_shape[axis] = end - begin;
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(x.dtype(), out_shape));
  const int64_t outer = shape.numel(0, axis);
  const int64_t inner = shape.numel(axis + 1, shape.rank());
  const int64_t block = (end - begin) * inner;
  for (int64_t o = 0; o < outer; ++o) {
    copy_elements(x, (o * shape[axis] + begin) * inner, out, o * block, block);
  }
  return out;
}

Result<Tensor> take_axis(const Tensor& x, int axis, int64_t index) {
  KILN_ASSIGN_OR_RETURN(Tensor slice, slice_axis(x, axis, index, index + 1));
  std::vector<int64_t> dims = x.shape().dims();
  dims.erase(dims.begin() + axis);
  return slice.reshaped(Shape(std::move(dims)));
}

Result<Tensor> concat_axis(const std::vector<Tensor>& parts, int axis) {
  KILN_CHECK(!parts.empty(), "concat_axis: no parts");
  const Tensor& first = parts.front();
  KILN_CHECK(axis >= 0 && axis < first.rank(), "concat_axis: axis out of range");
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (const Tensor& p : parts) {
    bool same = p.dtype() == first.dtype() && p.rank() == first.rank();
    for (int d = 0; same && d < p.rank(); ++d) same = d == axis || p.shape()[d] == first.shape()[d];
    if (!same) {
      return invalid_argument_error(fmt::format(
          "cannot join {}{} and {}{} along axis {}", dtype_name(first.dtype()),
          first.shape().to_string(), dtype_name(p.dtype()), p.shape().to_string(), axis));
    }
    out_shape[axis] += p.shape()[axis];
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(first.dtype(), out_shape));
  const int64_t outer = out_shape.numel(0, axis);
  const int64_t inner = out_shape.numel(axis + 1, out_shape.rank());
  int64_t offset = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& p : parts) {
      const int64_t block = p.shape()[axis] * inner;
      copy_elements(p, o * block, out, offset, block);
      offset += block;
    }
  }
  return out;
}

Result<Tensor> stack_axis(const std::vector<Tensor>& parts, int axis) {
  std::vector<Tensor> expanded;
  expanded.reserve(parts.size());
  for (const Tensor& p : parts) {
    if (!(p.shape() == parts.front().shape())) {
      return invalid_argument_error(fmt::format("cannot stack shapes {} and {}",
                                                parts.front().shape().to_string(),
                                                p.shape().to_string()));
    }
    std::vector<int64_t> dims = p.shape().dims();
    dims.insert(dims.begin() + axis, 1);
    expanded.push_back(p.reshaped(Shape(std::move(dims))));
  }
  return concat_axis(expanded, axis);
}

}  // namespace kiln::compiler::ref
