// SPDX-License-Identifier: Apache-2.0
// Resizes HWC uint8 images: nearest, linear, cubic, and antialiased (PIL-style) downscale.
#pragma once

#include "core/tensor.h"
#include "pipeline/kernels/crop_flip.h"

namespace kiln::pipeline::kernels {

enum class Interp {
  kNearest,  // the source pixel whose centre is nearest the output pixel's centre
  kLinear,   // bilinear between the two nearest source pixels (half-pixel centres, edge clamp)
  // Triangle filter whose support grows with the downscale factor, as PIL's BILINEAR resize and
  // torchvision's antialias=True: every source pixel contributes; equals kLinear when upscaling.
  kAntialiased,
  // Keys cubic (a = -0.5, PIL's BICUBIC), 4 taps; no low-pass filter when downscaling.
  kCubic,
  // Keys cubic whose support grows with the downscale factor, as PIL's BICUBIC resize.
  kCubicAntialiased,
};

// Resizes `in` [H, W, C] uint8 into `out` [H', W', C] uint8 (same C, any positive sizes).
// Shapes must agree (checked: a mismatch is a caller bug).
void resize_u8(const TensorView& in, const TensorView& out, Interp interp);

// Resizes only `window` of `in` (which must lie inside it, checked) into `out`, as if the window
// had been cropped first.
void resize_window_u8(const TensorView& in, const Window& window, const TensorView& out,
                      Interp interp);

}  // namespace kiln::pipeline::kernels
