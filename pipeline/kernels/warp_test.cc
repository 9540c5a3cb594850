// SPDX-License-Identifier: Apache-2.0
// Tests the warp, rotate, pad and cast kernels against exact expectations and a naive sampler.
#include "pipeline/kernels/warp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/kernels/kernel_test_util.h"

namespace kiln::pipeline::kernels {
namespace {

uint8_t at(const Tensor& t, int64_t y, int64_t x, int64_t c) {
  return t.data<uint8_t>()[(y * t.shape()[1] + x) * t.shape()[2] + c];
}

TEST(WarpTest, IdentityAndIntegerShiftsAreExact) {
  for (const auto& s : test::test_sizes()) {
    Tensor in = test::photo(s.w, s.h, s.c);
    Tensor out(DType::kU8, in.shape());
    for (bool linear : {false, true}) {
      warp_affine_u8(in.view(), out.view(), {1, 0, 0, 0, 1, 0}, linear, 0);
      EXPECT_TRUE(in.equals(out)) << s.w << "x" << s.h << " linear " << linear;
    }
    // Output (x, y) reads input (x + 2, y - 1): a shift left by 2 and down by 1, fill elsewhere.
    warp_affine_u8(in.view(), out.view(), {1, 0, 2, 0, 1, -1}, true, 9);
    for (int64_t y = 0; y < s.h; ++y) {
      for (int64_t x = 0; x < s.w; ++x) {
        const bool inside = x + 2 < s.w && y - 1 >= 0;
        for (int c = 0; c < s.c; ++c) {
          ASSERT_EQ(at(out, y, x, c), inside ? at(in, y - 1, x + 2, c) : 9);
        }
      }
    }
  }
}

TEST(WarpTest, RotationBy90DegreesTransposesAndMirrors) {
  for (const auto& s : test::test_sizes()) {
    Tensor in = test::photo(s.w, s.h, s.c);
    auto [oh, ow] = rotated_bounds(90.0, s.h, s.w);
    ASSERT_EQ(oh, s.w);
    ASSERT_EQ(ow, s.h);
    Tensor out(DType::kU8, Shape{oh, ow, s.c});
    warp_affine_u8(in.view(), out.view(), rotation(90.0, s.h, s.w, oh, ow), false, 0);
    // Counter-clockwise on screen: the input's top-right corner becomes the output's top-left.
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t x = 0; x < ow; ++x) {
        for (int c = 0; c < s.c; ++c) ASSERT_EQ(at(out, y, x, c), at(in, x, s.w - 1 - y, c));
      }
    }
  }
}

// Bilinear sampling written the textbook way, for an arbitrary rotation.
TEST(WarpTest, BilinearRotationMatchesNaiveSampler) {
  Tensor in = test::photo(97, 61, 3);
  auto [oh, ow] = rotated_bounds(33.0, 61, 97);
  Tensor out(DType::kU8, Shape{oh, ow, 3});
  const Affine m = rotation(33.0, 61, 97, oh, ow);
  warp_affine_u8(in.view(), out.view(), m, true, 0);
  const double a = 33.0 * M_PI / 180;
  int worst = 0;
  for (int64_t y = 0; y < oh; ++y) {
    for (int64_t x = 0; x < ow; ++x) {
      // Offset from the output centre, turned clockwise back onto the input.
      const double dx = x + 0.5 - ow / 2.0, dy = y + 0.5 - oh / 2.0;
      const double sx = std::cos(a) * dx - std::sin(a) * dy + 97 / 2.0 - 0.5;
      const double sy = std::sin(a) * dx + std::cos(a) * dy + 61 / 2.0 - 0.5;
      const auto x0 = static_cast<int64_t>(std::floor(sx)),
                 y0 = static_cast<int64_t>(std::floor(sy));
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (int j = 0; j < 2; ++j) {
          for (int i = 0; i < 2; ++i) {
            const int64_t px = x0 + i, py = y0 + j;
            const double wgt = (i ? sx - x0 : 1 - (sx - x0)) * (j ? sy - y0 : 1 - (sy - y0));
            if (px >= 0 && px < 97 && py >= 0 && py < 61) v += wgt * at(in, py, px, c);
          }
        }
        worst = std::max(worst, std::abs(int{at(out, y, x, c)} - static_cast<int>(std::lround(v))));
      }
    }
  }
  EXPECT_LE(worst, 1);
}

TEST(WarpTest, PadFillsAndCastRoundsAndSaturates) {
  Tensor in = test::photo(5, 3, 3);
  Tensor out(DType::kU8, Shape{4, 8, 3});
  pad_hwc(in.view(), out.view(), 7.0);
  for (int64_t y = 0; y < 4; ++y) {
    for (int64_t x = 0; x < 8; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(at(out, y, x, c), y < 3 && x < 5 ? at(in, y, x, c) : 7);
      }
    }
  }
  Tensor f = Tensor::from_vector(std::vector<float>{-3.2f, 0.5f, 1.49f, 254.5f, 300.0f, NAN});
  Tensor u(DType::kU8, f.shape());
  cast(f.view(), u.view());
  EXPECT_EQ(std::vector<uint8_t>(u.span<uint8_t>().begin(), u.span<uint8_t>().end()),
            (std::vector<uint8_t>{0, 1, 1, 255, 255, 0}));
  Tensor back(DType::kF32, u.shape());
  cast(u.view(), back.view());
  EXPECT_EQ(back.data<float>()[3], 255.0f);
  Tensor i32(DType::kI32, f.shape());
  cast(f.view(), i32.view());
  EXPECT_EQ(i32.data<int32_t>()[0], -3);
  EXPECT_EQ(i32.data<int32_t>()[4], 300);
}

}  // namespace
}  // namespace kiln::pipeline::kernels
