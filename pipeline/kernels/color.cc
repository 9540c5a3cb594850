// SPDX-License-Identifier: Apache-2.0
// Lookup tables for per-value colour maps and a 3x3 matrix pass for the ones that mix channels.
#include "pipeline/kernels/color.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kiln::pipeline::kernels {
namespace {

uint8_t saturate(double v) {
  return static_cast<uint8_t>(std::clamp(std::round(v), 0.0, 255.0));
}

using Mat3 = std::array<double, 9>;

Mat3 mul(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) c[i * 3 + j] += a[i * 3 + k] * b[k * 3 + j];
    }
  }
  return c;
}

// RGB <-> YIQ (NTSC), as DALI's hsv operator.
constexpr Mat3 kRgbToYiq{0.299, 0.587, 0.114, 0.596, -0.274, -0.321, 0.211, -0.523, 0.311};
constexpr Mat3 kYiqToRgb{1.0, 0.956, 0.621, 1.0, -0.272, -0.647, 1.0, -1.107, 1.705};

}  // namespace

void apply_lut_u8(const TensorView& in, const TensorView& out, const Lut& lut) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "apply_lut_u8: uint8 only");
  KILN_CHECK(in.shape() == out.shape(), "apply_lut_u8: shapes differ");
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
}

Lut brightness_contrast_lut(double brightness, double brightness_shift, double contrast,
                            double contrast_center) {
  Lut lut;
  for (int v = 0; v < 256; ++v) {
    lut[v] = saturate(brightness_shift * 255.0 +
                      brightness * (contrast_center + contrast * (v - contrast_center)));
  }
  return lut;
}

Lut gamma_lut(double gamma) {
  KILN_CHECK(gamma > 0.0, "gamma_lut: gamma must be positive");
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = saturate(255.0 * std::pow(v / 255.0, gamma));
  return lut;
}

ColorMatrix hsv_matrix(double hue_degrees, double saturation, double value) {
  const double h = hue_degrees * std::numbers::pi / 180.0;
  const double c = std::cos(h) * saturation, s = std::sin(h) * saturation;
  const Mat3 hs{value, 0, 0, 0, value * c, -value * s, 0, value * s, value * c};
  const Mat3 m = mul(kYiqToRgb, mul(hs, kRgbToYiq));
  ColorMatrix out;
  for (int i = 0; i < 9; ++i) out.m[i] = static_cast<float>(m[i]);
  return out;
}

ColorMatrix then_brightness_contrast(const ColorMatrix& m, double brightness,
                                     double brightness_shift, double contrast,
                                     double contrast_center) {
  // b * (cc + k * (x - cc)) + s * 255 = (b * k) * x + b * cc * (1 - k) + s * 255
  const double scale = brightness * contrast;
  const double shift = brightness * contrast_center * (1.0 - contrast) + brightness_shift * 255.0;
  ColorMatrix out;
  for (int i = 0; i < 9; ++i) out.m[i] = static_cast<float>(m.m[i] * scale);
  for (int i = 0; i < 3; ++i) out.offset[i] = static_cast<float>(m.offset[i] * scale + shift);
  return out;
}

void color_matrix_u8(const TensorView& in, const TensorView& out, const ColorMatrix& cm) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "color_matrix_u8: uint8");
  KILN_CHECK(in.shape().rank() == 3 && in.shape()[2] == 3, "color_matrix_u8: [H, W, 3] only");
  KILN_CHECK(in.shape() == out.shape(), "color_matrix_u8: shapes differ");
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  const int64_t n = in.shape()[0] * in.shape()[1];
  const auto& m = cm.m;
  const auto& b = cm.offset;
  auto to_u8 = [](float v) {
    return static_cast<uint8_t>(std::clamp(std::round(v), 0.0f, 255.0f));
  };
  for (int64_t i = 0; i < n; ++i, src += 3, dst += 3) {
    const float r = src[0], g = src[1], bl = src[2];
    const float o0 = m[0] * r + m[1] * g + m[2] * bl + b[0];
    const float o1 = m[3] * r + m[4] * g + m[5] * bl + b[1];
    const float o2 = m[6] * r + m[7] * g + m[8] * bl + b[2];
    dst[0] = to_u8(o0);
    dst[1] = to_u8(o1);
    dst[2] = to_u8(o2);
  }
}

}  // namespace kiln::pipeline::kernels
