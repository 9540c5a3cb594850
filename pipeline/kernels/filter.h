// SPDX-License-Identifier: Apache-2.0
// Neighbourhood and per-pixel random kernels on HWC uint8 images: gaussian blur and noise.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

// The normalised 1-D gaussian of `sigma` (> 0) over `window` taps (odd; 0: 2 * ceil(3 sigma) + 1).
std::vector<float> gaussian_taps(double sigma, int64_t window);

// Separable convolution of `in` [H, W, C] uint8 with `taps_y` down and `taps_x` across (odd
// lengths), borders mirrored without repeating the edge (reflect-101, as OpenCV and DALI);
// rounded and saturated into `out` (same shape, must not alias `in`).
void convolve_separable_u8(const TensorView& in, const TensorView& out,
                           const std::vector<float>& taps_y, const std::vector<float>& taps_x);

// out = saturate(round(in + N(mean, stddev))), one draw per element from `seed`.
void gaussian_noise_u8(const TensorView& in, const TensorView& out, double mean, double stddev,
                       uint64_t seed);

// Each pixel (or each element when `per_channel`) becomes, with probability `prob`, salt (255)
// with probability `salt_vs_pepper` or pepper (0); the rest are copied. Draws come from `seed`.
void salt_and_pepper_u8(const TensorView& in, const TensorView& out, double prob,
                        double salt_vs_pepper, bool per_channel, uint64_t seed);

}  // namespace kiln::pipeline::kernels
