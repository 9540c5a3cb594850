// SPDX-License-Identifier: Apache-2.0
// Resize geometry shared by inference and kernels: one scale factor and output size per axis.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/ops/image.h"
#include "core/status.h"

namespace kiln::compiler {

// A Resize over every axis of its input, with `axes` and `keep_aspect_ratio_policy` applied.
struct ResizeGeometry {
  std::vector<double> scales;  // the coordinate scale per axis (NaN where sizes meet an unknown dim)
  std::vector<int64_t> sizes;  // the output size per axis (-1 where unknown)
  std::vector<double> roi;     // starts then ends per axis, or empty without a roi
};

// `in`: the input's dims (-1 unknown). Exactly one of `scales` and `sizes` is given, with one value
// per axis the op resizes (op.axes, or every axis); `roi` is empty or holds starts and ends for
// those axes. Fails (invalid argument, message without the node) on a count that does not match,
// bad axes, or non-positive scales.
Result<ResizeGeometry> resize_geometry(const ops::Resize& op, std::span<const int64_t> in,
                                       const std::vector<double>* scales,
                                       const std::vector<int64_t>* sizes,
                                       const std::vector<double>& roi);

}  // namespace kiln::compiler
