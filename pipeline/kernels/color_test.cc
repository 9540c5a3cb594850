// SPDX-License-Identifier: Apache-2.0
// Tests the colour kernels against per-pixel formulas in double precision.
#include "pipeline/kernels/color.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/kernels/kernel_test_util.h"

namespace kiln::pipeline::kernels {
namespace {

uint8_t sat(double v) {
  return static_cast<uint8_t>(std::clamp(std::round(v), 0.0, 255.0));
}

TEST(ColorTest, BrightnessContrastAndGammaMatchTheFormulas) {
  for (const auto& s : test::test_sizes()) {
    Tensor in = test::photo(s.w, s.h, s.c);
    Tensor out(DType::kU8, in.shape());
    apply_lut_u8(in.view(), out.view(), brightness_contrast_lut(1.3, -0.1, 0.7, 100.0));
    for (int64_t i = 0; i < in.numel(); ++i) {
      const double v = in.data<uint8_t>()[i];
      ASSERT_EQ(out.data<uint8_t>()[i], sat(-0.1 * 255 + 1.3 * (100 + 0.7 * (v - 100))));
    }
    apply_lut_u8(in.view(), out.view(), gamma_lut(0.45));
    for (int64_t i = 0; i < in.numel(); ++i) {
      const double v = in.data<uint8_t>()[i];
      ASSERT_EQ(out.data<uint8_t>()[i], sat(255 * std::pow(v / 255, 0.45)));
    }
  }
}

// DALI's hsv, written out: RGB -> YIQ, rotate and scale IQ, scale all by value, back to RGB.
std::array<double, 3> reference_hsv(double r, double g, double b, double hue, double sat_,
                                    double value) {
  const double y = 0.299 * r + 0.587 * g + 0.114 * b;
  const double i = 0.596 * r - 0.274 * g - 0.321 * b;
  const double q = 0.211 * r - 0.523 * g + 0.311 * b;
  const double a = hue * M_PI / 180;
  const double i2 = sat_ * (i * std::cos(a) - q * std::sin(a));
  const double q2 = sat_ * (i * std::sin(a) + q * std::cos(a));
  const double y2 = value * y, i3 = value * i2, q3 = value * q2;
  return {y2 + 0.956 * i3 + 0.621 * q3, y2 - 0.272 * i3 - 0.647 * q3, y2 - 1.107 * i3 + 1.705 * q3};
}

TEST(ColorTest, HsvAndColorTwistMatchTheYiqReference) {
  for (const auto& s : test::test_sizes()) {
    if (s.c != 3) continue;
    Tensor in = test::photo(s.w, s.h, s.c);
    Tensor hsv(DType::kU8, in.shape()), twist(DType::kU8, in.shape());
    color_matrix_u8(in.view(), hsv.view(), hsv_matrix(40.0, 0.6, 1.1));
    color_matrix_u8(in.view(), twist.view(),
                    then_brightness_contrast(hsv_matrix(-25.0, 1.4, 1.0), 0.9, 0.0, 1.2, 128.0));
    int worst = 0;
    for (int64_t p = 0; p < in.numel() / 3; ++p) {
      const uint8_t* px = in.data<uint8_t>() + p * 3;
      auto h = reference_hsv(px[0], px[1], px[2], 40.0, 0.6, 1.1);
      auto t = reference_hsv(px[0], px[1], px[2], -25.0, 1.4, 1.0);
      for (int c = 0; c < 3; ++c) {
        worst = std::max(worst, std::abs(int{hsv.data<uint8_t>()[p * 3 + c]} - int{sat(h[c])}));
        const double twisted = 0.9 * (128 + 1.2 * (t[c] - 128));
        worst =
            std::max(worst, std::abs(int{twist.data<uint8_t>()[p * 3 + c]} - int{sat(twisted)}));
      }
    }
    EXPECT_LE(worst, 1) << s.w << "x" << s.h;  // float vs double rounding at .5
  }
}

TEST(ColorTest, NeutralSettingsAreTheIdentity) {
  Tensor in = test::photo(53, 31, 3);
  Tensor out(DType::kU8, in.shape());
  color_matrix_u8(in.view(), out.view(), hsv_matrix(0.0, 1.0, 1.0));
  EXPECT_LE(test::max_abs_diff(in, out), 1);
  apply_lut_u8(in.view(), out.view(), brightness_contrast_lut(1.0, 0.0, 1.0, 128.0));
  EXPECT_TRUE(in.equals(out));
  // Saturation 0 gives gray: all three channels equal.
  color_matrix_u8(in.view(), out.view(), hsv_matrix(0.0, 0.0, 1.0));
  for (int64_t p = 0; p < out.numel() / 3; ++p) {
    const uint8_t* px = out.data<uint8_t>() + p * 3;
    ASSERT_LE(std::abs(px[0] - px[1]) + std::abs(px[1] - px[2]), 1);
  }
}

}  // namespace
}  // namespace kiln::pipeline::kernels
