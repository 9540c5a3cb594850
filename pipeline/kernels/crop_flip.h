// SPDX-License-Identifier: Apache-2.0
// Crops and flips HWC images of any element type (whole elements are copied, no arithmetic).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

// A window of an HWC image in pixels: rows [y, y + height), columns [x, x + width).
struct Window {
  int64_t y = 0;
  int64_t x = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// Copies `window` of `in` [H, W, C] into `out` [window.height, window.width, C] (same dtype).
// The window must lie inside the image (checked).
void crop_hwc(const TensorView& in, const TensorView& out, const Window& window);

// Writes `in` [H, W, C] mirrored left-right and/or upside-down into `out` (same shape and dtype;
// out must not alias in).
void flip_hwc(const TensorView& in, const TensorView& out, bool horizontal, bool vertical);

}  // namespace kiln::pipeline::kernels
