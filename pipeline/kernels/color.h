// SPDX-License-Identifier: Apache-2.0
// Colour kernels on HWC uint8 images: per-value lookup tables and 3x3 colour matrices.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

using Lut = std::array<uint8_t, 256>;

// out = lut[in] for every element; `in` and `out` are uint8 of the same shape (they may alias).
void apply_lut_u8(const TensorView& in, const TensorView& out, const Lut& lut);

// DALI's brightness_contrast on the 0..255 range:
//   out = brightness_shift * 255 + brightness * (contrast_center + contrast * (in -
//   contrast_center))
// rounded half away from zero and saturated.
Lut brightness_contrast_lut(double brightness, double brightness_shift, double contrast,
                            double contrast_center);

// out = 255 * (in / 255) ^ gamma (gamma > 0), rounded and saturated.
Lut gamma_lut(double gamma);

// A 3x3 colour matrix plus offset: out = m * in + offset, per RGB pixel.
struct ColorMatrix {
  std::array<float, 9> m{1, 0, 0, 0, 1, 0, 0, 0, 1};  // row-major
  std::array<float, 3> offset{0, 0, 0};
};

// DALI's hsv as a linear map in YIQ space: hue rotates the chroma plane by `hue_degrees`,
// saturation scales it, value scales everything.
ColorMatrix hsv_matrix(double hue_degrees, double saturation, double value);

// brightness/contrast (as brightness_contrast_lut) applied after `m`.
ColorMatrix then_brightness_contrast(const ColorMatrix& m, double brightness,
                                     double brightness_shift, double contrast,
                                     double contrast_center);

// out = round(m * in + offset), saturated; `in` and `out` are [H, W, 3] uint8 (may alias).
void color_matrix_u8(const TensorView& in, const TensorView& out, const ColorMatrix& m);

}  // namespace kiln::pipeline::kernels
