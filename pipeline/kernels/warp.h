// SPDX-License-Identifier: Apache-2.0
// Geometric kernels on HWC images: affine warps (rotate is one), padding and dtype casts.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

// Maps output pixel centres to input coordinates: (sx, sy) = (m0 x + m1 y + m2, m3 x + m4 y + m5)
// with pixel centres at +0.5.
using Affine = std::array<double, 6>;

// For every output pixel, samples `in` [H, W, C] uint8 at the mapped point: nearest, or bilinear
// (`linear`); points outside the image take `fill`. `out` is [H', W', C] uint8.
void warp_affine_u8(const TensorView& in, const TensorView& out, const Affine& out_to_in,
                    bool linear, uint8_t fill);

// The output -> input map of a rotation by `degrees` counter-clockwise (as seen on screen) about
// the image centre, for an input of in_h x in_w shown centred in an out_h x out_w output.
Affine rotation(double degrees, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w);

// The smallest (height, width) that holds the whole image rotated by `degrees`.
std::array<int64_t, 2> rotated_bounds(double degrees, int64_t h, int64_t w);

// Copies `in` [H, W, C] to the top-left of `out` [H', W', C] (H' >= H, W' >= W, same dtype: uint8
// or float32) and fills the rest with `fill`.
void pad_hwc(const TensorView& in, const TensorView& out, double fill);

// Converts every element of `in` to the dtype of `out` (same shape; uint8, int32 or float32).
// Float to integer rounds half away from zero and saturates.
void cast(const TensorView& in, const TensorView& out);

}  // namespace kiln::pipeline::kernels
