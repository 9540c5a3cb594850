// SPDX-License-Identifier: Apache-2.0
// Resizes HWC uint8 images: nearest, linear, and antialiased (PIL-style triangle) downscale.
#pragma once

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

enum class Interp {
  kNearest,  // the source pixel whose centre is nearest the output pixel's centre
  kLinear,   // bilinear between the two nearest source pixels (half-pixel centres, edge clamp)
  // Triangle filter whose support grows with the downscale factor, as PIL's BILINEAR resize and
  // torchvision's antialias=True: every source pixel contributes; equals kLinear when upscaling.
  kAntialiased,
};

// Resizes `in` [H, W, C] uint8 into `out` [H', W', C] uint8 (same C, any positive sizes).
// Shapes must agree (checked: a mismatch is a caller bug).
void resize_u8(const TensorView& in, const TensorView& out, Interp interp);

}  // namespace kiln::pipeline::kernels
