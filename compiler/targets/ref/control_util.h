// SPDX-License-Identifier: Apache-2.0
// Tensor slicing and joining along one axis, for the ref kernels of sequences and loops.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

// Copies `count` elements of `src` from `src_offset` into `dst` at `dst_offset` (same dtype;
// strings are copied, not shared).
void copy_elements(const Tensor& src, int64_t src_offset, const Tensor& dst, int64_t dst_offset,
                   int64_t count);

// The elements [begin, end) of `x` along `axis` (0 <= begin <= end <= dim), as a new tensor.
Result<Tensor> slice_axis(const Tensor& x, int axis, int64_t begin, int64_t end);

// Element `index` of `x` along `axis`, with that axis removed.
Result<Tensor> take_axis(const Tensor& x, int axis, int64_t index);

// The parts joined along `axis` (0 <= axis < rank). Every part must have the first part's dtype
// and rank and the same dims off `axis`; a mismatch is an invalid-argument error naming the shapes.
Result<Tensor> concat_axis(const std::vector<Tensor>& parts, int axis);

// The parts (all of one shape) stacked along a new axis `axis` (0 <= axis <= rank).
Result<Tensor> stack_axis(const std::vector<Tensor>& parts, int axis);

}  // namespace kiln::compiler::ref
