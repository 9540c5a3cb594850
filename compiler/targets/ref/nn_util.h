// SPDX-License-Identifier: Apache-2.0
// Helpers of the nn family's ref kernels: double-precision staging and window walks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/ops/nn_util.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

// Writes `values` into `out` (same element count), rounding to its element type; integer types
// round to nearest and saturate, bool is value != 0.
void store_doubles(std::span<const double> values, Tensor& out);

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

// For the window at output position `out_index`: the row-major offset into one input plane of
// spatial dims `in` for each kernel element (row-major over the kernel), or -1 where the element
// falls into padding. `offsets` is resized to the kernel's element count.
void window_offsets(const WindowGeometry& g, std::span<const int64_t> in,
                    std::span<const int64_t> out_index, std::vector<int64_t>& offsets);

}  // namespace kiln::compiler::ref
