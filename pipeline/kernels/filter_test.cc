// SPDX-License-Identifier: Apache-2.0
// Tests blur against a direct 2-D convolution, and the noise kernels' statistics and seeding.
#include "pipeline/kernels/filter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/kernels/kernel_test_util.h"

namespace kiln::pipeline::kernels {
namespace {

int64_t reflect101(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

// Direct 2-D sum over the window with the gaussian computed in place.
Tensor reference_blur(const Tensor& in, double sigma) {
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  const int64_t r = static_cast<int64_t>(std::ceil(3 * sigma));
  double total = 0;
  for (int64_t i = -r; i <= r; ++i) total += std::exp(-0.5 * i * i / (sigma * sigma));
  Tensor out(DType::kU8, in.shape());
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        double acc = 0;
        for (int64_t dy = -r; dy <= r; ++dy) {
          for (int64_t dx = -r; dx <= r; ++dx) {
            const double g =
                std::exp(-0.5 * (dy * dy + dx * dx) / (sigma * sigma)) / (total * total);
            acc += g *
                   in.data<uint8_t>()[(reflect101(y + dy, h) * w + reflect101(x + dx, w)) * c + ch];
          }
        }
        out.data<uint8_t>()[(y * w + x) * c + ch] =
            static_cast<uint8_t>(std::clamp(std::round(acc), 0.0, 255.0));
      }
    }
  }
  return out;
}

TEST(FilterTest, GaussianBlurMatchesDirectConvolution) {
  for (const auto& s : test::test_sizes()) {
    if (s.w > 1000) continue;  // the reference is O(r^2) per pixel; the large case runs below
    for (double sigma : {0.8, 2.0}) {
      Tensor in = test::photo(s.w, s.h, s.c);
      Tensor out(DType::kU8, in.shape());
      auto taps = gaussian_taps(sigma, 0);
      convolve_separable_u8(in.view(), out.view(), taps, taps);
      EXPECT_LE(test::max_abs_diff(out, reference_blur(in, sigma)), 1)
          << s.w << "x" << s.h << "x" << s.c << " sigma " << sigma;
    }
  }
}

TEST(FilterTest, LargeImageBlurKeepsFlatAreasAndShrinksVariance) {
  Tensor in = test::photo(2048, 1536, 3);
  Tensor out(DType::kU8, in.shape());
  auto taps = gaussian_taps(3.0, 0);
  convolve_separable_u8(in.view(), out.view(), taps, taps);
  auto variance = [](const Tensor& t) {
    double sum = 0, sq = 0;
    for (uint8_t v : t.span<uint8_t>()) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(t.numel());
    return sq / n - (sum / n) * (sum / n);
  };
  EXPECT_LT(variance(out), variance(in));
  Tensor flat(DType::kU8, Shape{300, 301, 1});
  std::fill(flat.data<uint8_t>(), flat.data<uint8_t>() + flat.numel(), 77);
  Tensor flat_out(DType::kU8, flat.shape());
  convolve_separable_u8(flat.view(), flat_out.view(), taps, taps);
  EXPECT_TRUE(flat.equals(flat_out));
}

TEST(FilterTest, GaussianNoiseHasTheRequestedStatisticsAndIsSeeded) {
  Tensor in(DType::kU8, Shape{400, 500, 3});
  std::fill(in.data<uint8_t>(), in.data<uint8_t>() + in.numel(), 128);
  Tensor a(DType::kU8, in.shape()), b(DType::kU8, in.shape()), c(DType::kU8, in.shape());
  gaussian_noise_u8(in.view(), a.view(), 2.0, 10.0, 42);
  gaussian_noise_u8(in.view(), b.view(), 2.0, 10.0, 42);
  gaussian_noise_u8(in.view(), c.view(), 2.0, 10.0, 43);
  EXPECT_TRUE(a.equals(b));
  EXPECT_FALSE(a.equals(c));
  double sum = 0, sq = 0;
  for (uint8_t v : a.span<uint8_t>()) {
    sum += v - 128.0;
    sq += (v - 128.0) * (v - 128.0);
  }
  const double n = static_cast<double>(a.numel());
  const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 2.0, 0.1);
  EXPECT_NEAR(stddev, 10.0, 0.2);
  Tensor one = test::photo(1, 1, 1), one_out(DType::kU8, Shape{1, 1, 1});
  gaussian_noise_u8(one.view(), one_out.view(), 0.0, 0.0, 1);
  EXPECT_TRUE(one.equals(one_out));
}

TEST(FilterTest, SaltAndPepperReplacesTheRequestedFraction) {
  Tensor in(DType::kU8, Shape{300, 400, 3});
  std::fill(in.data<uint8_t>(), in.data<uint8_t>() + in.numel(), 100);
  for (bool per_channel : {false, true}) {
    Tensor out(DType::kU8, in.shape());
    salt_and_pepper_u8(in.view(), out.view(), 0.2, 0.25, per_channel, 7);
    int64_t salt = 0, pepper = 0, mixed = 0;
    for (int64_t p = 0; p < out.numel() / 3; ++p) {
      const uint8_t* px = out.data<uint8_t>() + p * 3;
      for (int ch = 0; ch < 3; ++ch) {
        salt += px[ch] == 255;
        pepper += px[ch] == 0;
      }
      mixed += px[0] != px[1] || px[1] != px[2];
    }
    const double n = static_cast<double>(out.numel());
    EXPECT_NEAR((salt + pepper) / n, 0.2, 0.01);
    EXPECT_NEAR(salt / static_cast<double>(salt + pepper), 0.25, 0.02);
    EXPECT_EQ(mixed > 0, per_channel);
  }
}

}  // namespace
}  // namespace kiln::pipeline::kernels
