// SPDX-License-Identifier: Apache-2.0
#include "compiler/targets/cuda/views.h"

#include <cstddef>

namespace kiln::compiler::cuda {

std::optional<StridedView> reshape_view(const StridedView& v, const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : v.dims) count *= d;
  int64_t want = 1;
  for (int64_t d : shape) want *= d;
  if (count != want || count == 0) return std::nullopt;
  // Dims of size 1 take no part: match the others group by group, each group of old dims with
  // equal product to a group of new ones.
  std::vector<int64_t> od, os;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (v.dims[i] != 1) {
      od.push_back(v.dims[i]);
      os.push_back(v.strides[i]);
    }
  }
  std::vector<size_t> at;  // index in `shape` of each dim that is not 1
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) at.push_back(i);
  }
  StridedView out;
  out.dims = shape;
  out.strides.assign(shape.size(), 0);
  out.offset = v.offset;
  size_t i = 0, j = 0;
  while (i < od.size() && j < at.size()) {
    int64_t op = od[i], np = shape[at[j]];
    size_t oi = i + 1, nj = j + 1;
    while (op != np) {
      if (np < op) {
        np *= shape[at[nj++]];
      } else {
        op *= od[oi++];
      }
    }
    // Old dims i..oi-1 merge only where each steps over the whole of the next.
    for (size_t k = i; k + 1 < oi; ++k) {
      if (os[k] != os[k + 1] * od[k + 1]) return std::nullopt;
    }
    int64_t stride = os[oi - 1];
    for (size_t k = nj; k-- > j;) {
      out.strides[at[k]] = stride;
      stride *= shape[at[k]];
    }
    i = oi;
    j = nj;
  }
  return out;
}

StridedView permute_view(const StridedView& v, const std::vector<int64_t>& perm) {
  StridedView out;
  out.offset = v.offset;
  for (int64_t p : perm) {
    out.dims.push_back(v.dims[static_cast<size_t>(p)]);
    out.strides.push_back(v.strides[static_cast<size_t>(p)]);
  }
  return out;
}

}  // namespace kiln::compiler::cuda
