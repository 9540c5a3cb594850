// SPDX-License-Identifier: Apache-2.0
// Strided views of a buffer (dims, element strides, offset): what the cuda target's strided copies
// read. Plain C++, no CUDA.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::compiler::cuda {

struct StridedView {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // in elements, per dim
  int64_t offset = 0;            // element offset of the first element
};

// `v`'s elements, in row-major order, as a view of dims `shape` (same element count), when strides
// can express it: dims may be split freely and merged only where `v` is contiguous across them.
std::optional<StridedView> reshape_view(const StridedView& v, const std::vector<int64_t>& shape);

// `v` with its dims reordered: dim d of the result is dim perm[d] of `v` (ONNX Transpose).
StridedView permute_view(const StridedView& v, const std::vector<int64_t>& perm);

}  // namespace kiln::compiler::cuda
