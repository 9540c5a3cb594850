// SPDX-License-Identifier: Apache-2.0
// Index arithmetic for ref kernels.
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(static_cast<size_t>(out.rank()), 0);
  const std::vector<int64_t> own = in.strides();
  const int offset = out.rank() - in.rank();
  for (int d = 0; d < in.rank(); ++d) {
    strides[static_cast<size_t>(d + offset)] = in[d] == 1 ? 0 : own[static_cast<size_t>(d)];
  }
  return strides;
}

std::vector<int64_t> unravel_index(int64_t offset, const Shape& shape) {
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    int64_t dim = shape[d] > 0 ? shape[d] : 1;
    index[static_cast<size_t>(d)] = offset % dim;
    offset /= dim;
  }
  return index;
}

int64_t ravel_index(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t offset = 0;
  for (int d = 0; d < shape.rank(); ++d) offset = offset * shape[d] + index[static_cast<size_t>(d)];
  return offset;
}

}  // namespace kiln::compiler::ref
