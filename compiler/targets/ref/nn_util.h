// SPDX-License-Identifier: Apache-2.0
// Helpers of the nn family's ref kernels: double-precision staging and window walks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/ops/nn_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/ref_util.h"
#include "core/tensor.h"

namespace kiln::compiler::ref {

// For the window at output position `out_index`: the row-major offset into one input plane of
// spatial dims `in` for each kernel element (row-major over the kernel), or -1 where the element
// falls into padding. `offsets` is resized to the kernel's element count.
void window_offsets(const WindowGeometry& g, std::span<const int64_t> in,
                    std::span<const int64_t> out_index, std::vector<int64_t>& offsets);

}  // namespace kiln::compiler::ref
