// SPDX-License-Identifier: Apache-2.0
// Tests crop window selection: anchored crops and RandomResizedCrop semantics.
#include "pipeline/operators/crop_window.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace kiln::pipeline {
namespace {

TEST(CropWindowTest, AnchoredWindowPositions) {
  auto centre = anchored_window("crop", 10, 20, 4, 6, 0.5, 0.5);
  ASSERT_TRUE(centre.ok());
  EXPECT_EQ(centre->y, 3);
  EXPECT_EQ(centre->x, 7);
  auto corner = anchored_window("crop", 10, 20, 4, 6, 1.0, 0.0);
  ASSERT_TRUE(corner.ok());
  EXPECT_EQ(corner->y, 0);
  EXPECT_EQ(corner->x, 14);
  auto big = anchored_window("crop", 10, 20, 11, 6, 0.5, 0.5);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(),
              ::testing::HasSubstr("operator crop: crop 11x6 (HxW) is larger than the 10x20"));
  EXPECT_FALSE(anchored_window("crop", 10, 20, 4, 6, 1.5, 0.5).ok());
}

TEST(CropWindowTest, RandomResizedCropRespectsAreaAndAspectRanges) {
  RandomCropParams params;  // area [0.08, 1], aspect [3/4, 4/3]
  SampleRng rng(123);
  const int64_t h = 480, w = 640;
  double min_area = 1, max_area = 0;
  for (int i = 0; i < 2000; ++i) {
    kernels::Window win = random_resized_crop_window(h, w, params, rng);
    ASSERT_GE(win.x, 0);
    ASSERT_GE(win.y, 0);
    ASSERT_LE(win.x + win.width, w);
    ASSERT_LE(win.y + win.height, h);
    double area = static_cast<double>(win.width * win.height) / (h * w);
    double aspect = static_cast<double>(win.width) / win.height;
    min_area = std::min(min_area, area);
    max_area = std::max(max_area, area);
    if (win.width == w && win.height == h) continue;  // the fallback
    // Rounding of sqrt(area * aspect) moves both a little.
    ASSERT_GE(area, 0.08 * 0.97);
    ASSERT_GE(aspect, 0.75 * 0.97);
    ASSERT_LE(aspect, 4.0 / 3.0 * 1.03);
  }
  EXPECT_LT(min_area, 0.12);  // the whole range is explored
  EXPECT_GT(max_area, 0.9);
}

TEST(CropWindowTest, RandomResizedCropIsDeterministicPerSeed) {
  RandomCropParams params;
  SampleRng a(5), b(5), c(6);
  kernels::Window wa = random_resized_crop_window(300, 200, params, a);
  kernels::Window wb = random_resized_crop_window(300, 200, params, b);
  kernels::Window wc = random_resized_crop_window(300, 200, params, c);
  EXPECT_EQ(std::tie(wa.x, wa.y, wa.width, wa.height), std::tie(wb.x, wb.y, wb.width, wb.height));
  EXPECT_NE(std::tie(wa.x, wa.y, wa.width, wa.height), std::tie(wc.x, wc.y, wc.width, wc.height));
}

TEST(CropWindowTest, RandomResizedCropFallsBackToAClampedCentreCrop) {
  RandomCropParams params;
  SampleRng rng(1);
  // A 10-pixel-high strip: no draw with area >= 8% and aspect <= 4/3 fits.
  kernels::Window win = random_resized_crop_window(10, 1000, params, rng);
  EXPECT_EQ(win.height, 10);
  EXPECT_EQ(win.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(win.x, (1000 - 13) / 2);
  EXPECT_EQ(win.y, 0);
  kernels::Window tall = random_resized_crop_window(1000, 10, params, rng);
  EXPECT_EQ(tall.width, 10);
  EXPECT_EQ(tall.height, 13);  // round(10 / (3/4))
}

}  // namespace
}  // namespace kiln::pipeline
