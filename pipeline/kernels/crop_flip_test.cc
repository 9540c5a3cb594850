// SPDX-License-Identifier: Apache-2.0
// Tests crop, flip and the fused crop-mirror-normalize kernel against naive loops.
#include "pipeline/kernels/crop_flip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "pipeline/kernels/kernel_test_util.h"
#include "pipeline/kernels/normalize.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline::kernels {
namespace {

Tensor image(int w, int h, int c) {
  Tensor t(DType::kU8, Shape{h, w, c});
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>((i * 37 + 11) % 251);
  return t;
}

uint8_t at(const Tensor& t, int64_t y, int64_t x, int64_t c) {
  return t.data<uint8_t>()[(y * t.shape()[1] + x) * t.shape()[2] + c];
}

TEST(CropFlipTest, CropCopiesTheWindow) {
  Tensor in = image(11, 7, 3);
  Window w{2, 3, 4, 5};
  Tensor out(DType::kU8, Shape{4, 5, 3});
  crop_hwc(in.view(), out.view(), w);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(at(out, y, x, c), at(in, y + 2, x + 3, c));
    }
  }
}

TEST(CropFlipTest, CropWorksForFloatImages) {
  Tensor in(DType::kF32, Shape{3, 4, 2});
  for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = static_cast<float>(i);
  Tensor out(DType::kF32, Shape{1, 2, 2});
  crop_hwc(in.view(), out.view(), Window{2, 1, 1, 2});
  EXPECT_EQ(std::vector<float>(out.data<float>(), out.data<float>() + 4),
            (std::vector<float>{18, 19, 20, 21}));
}

TEST(CropFlipTest, FlipMatchesReference) {
  Tensor in = image(5, 3, 3);
  for (bool h : {false, true}) {
    for (bool v : {false, true}) {
      Tensor out(DType::kU8, in.shape());
      flip_hwc(in.view(), out.view(), h, v);
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < 5; ++x) {
          for (int c = 0; c < 3; ++c) {
            ASSERT_EQ(at(out, y, x, c), at(in, v ? 2 - y : y, h ? 4 - x : x, c));
          }
        }
      }
    }
  }
}

TEST(NormalizeTest, FusedKernelMatchesReferenceInBothLayoutsAndDtypes) {
  Tensor in = image(9, 6, 3);
  const std::vector<float> mean{10.f, 120.f, 200.f}, stddev{2.f, 50.f, 0.5f};
  Window win{1, 2, 4, 5};
  for (bool mirror : {false, true}) {
    for (Layout layout : {Layout::kHWC, Layout::kCHW}) {
      Shape shape = layout == Layout::kHWC ? Shape{4, 5, 3} : Shape{3, 4, 5};
      Tensor f(DType::kF32, shape), u(DType::kU8, shape);
      crop_mirror_normalize_u8(in.view(), f.view(), win, mirror, mean, stddev, layout);
      crop_mirror_normalize_u8(in.view(), u.view(), win, mirror, mean, stddev, layout);
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 5; ++x) {
          for (int c = 0; c < 3; ++c) {
            int sx = 2 + (mirror ? 4 - x : x);
            double ref = (at(in, 1 + y, sx, c) - mean[c]) / stddev[c];
            int64_t idx = layout == Layout::kHWC ? (y * 5 + x) * 3 + c : (c * 4 + y) * 5 + x;
            ASSERT_NEAR(f.data<float>()[idx], ref, 1e-4 * (1 + std::abs(ref)));
            ASSERT_EQ(u.data<uint8_t>()[idx],
                      static_cast<uint8_t>(std::clamp(std::round(ref), 0.0, 255.0)));
          }
        }
      }
    }
  }
}

TEST(NormalizeTest, Float16IsTheFloat32ResultRoundedToHalf) {
  // 37 columns: the SIMD body and the scalar tail both run; 1-channel takes the generic path.
  for (int c : {3, 1}) {
    Tensor in = image(41, 7, c);
    const std::vector<float> mean{123.675f, 116.28f, 103.53f}, stddev{58.395f, 57.12f, 57.375f};
    std::span<const float> m(mean.data(), static_cast<size_t>(c));
    std::span<const float> s(stddev.data(), static_cast<size_t>(c));
    Window win{1, 3, 5, 37};
    for (bool mirror : {false, true}) {
      for (Layout layout : {Layout::kHWC, Layout::kCHW}) {
        Shape shape = layout == Layout::kHWC ? Shape{5, 37, c} : Shape{c, 5, 37};
        Tensor f(DType::kF32, shape), h(DType::kF16, shape);
        crop_mirror_normalize_u8(in.view(), f.view(), win, mirror, m, s, layout);
        crop_mirror_normalize_u8(in.view(), h.view(), win, mirror, m, s, layout);
        for (int64_t i = 0; i < f.numel(); ++i) {
          ASSERT_EQ(h.data<Half>()[i].bits, Half(f.data<float>()[i]).bits)
              << "element " << i << " of " << f.data<float>()[i];
        }
      }
    }
  }
}

TEST(CropFlipTest, CropFlipAndNormalizeMatchNaiveLoopsOnEveryTestSize) {
  for (const auto& s : test::test_sizes()) {
    Tensor in = test::photo(s.w, s.h, s.c);
    const int64_t h = s.h, w = s.w, c = s.c;
    // A window a third in from the top-left, at least one pixel.
    const Window win{h / 3, w / 3, std::max<int64_t>(h / 2, 1), std::max<int64_t>(w / 2, 1)};
    Tensor crop(DType::kU8, Shape{win.height, win.width, c});
    crop_hwc(in.view(), crop.view(), win);
    Tensor flip(DType::kU8, in.shape());
    flip_hwc(in.view(), flip.view(), true, true);
    const std::vector<float> mean{123.675f, 116.28f, 103.53f}, stddev{58.395f, 57.12f, 57.375f};
    std::span<const float> m(mean.data(), static_cast<size_t>(c)),
        sd(stddev.data(), static_cast<size_t>(c));
    Tensor chw(DType::kF32, Shape{c, win.height, win.width});
    crop_mirror_normalize_u8(in.view(), chw.view(), win, true, m, sd, Layout::kCHW);
    Tensor hwc16(DType::kF16, Shape{win.height, win.width, c});
    crop_mirror_normalize_u8(in.view(), hwc16.view(), win, false, m, sd, Layout::kHWC);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) {
          ASSERT_EQ(at(flip, y, x, ch), at(in, h - 1 - y, w - 1 - x, ch)) << s.w << "x" << s.h;
        }
      }
    }
    for (int64_t y = 0; y < win.height; ++y) {
      for (int64_t x = 0; x < win.width; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) {
          ASSERT_EQ(at(crop, y, x, ch), at(in, win.y + y, win.x + x, ch));
          const float mirrored =
              (static_cast<float>(at(in, win.y + y, win.x + win.width - 1 - x, ch)) - mean[ch]) /
              stddev[ch];
          ASSERT_NEAR(chw.data<float>()[(ch * win.height + y) * win.width + x], mirrored,
                      1e-5f * (1 + std::abs(mirrored)));
          const float plain =
              (static_cast<float>(at(in, win.y + y, win.x + x, ch)) - mean[ch]) / stddev[ch];
          ASSERT_NEAR(hwc16.data<Half>()[(y * win.width + x) * c + ch], plain,
                      1e-3f * (1 + std::abs(plain)));
        }
      }
    }
  }
}

TEST(NormalizeTest, SingleMeanAndStdApplyToEveryChannel) {
  Tensor in = image(2, 2, 3);
  Tensor out(DType::kF32, Shape{2, 2, 3});
  const std::vector<float> mean{100.f}, stddev{10.f};
  crop_mirror_normalize_u8(in.view(), out.view(), Window{0, 0, 2, 2}, false, mean, stddev,
                           Layout::kHWC);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(out.data<float>()[i], (in.data<uint8_t>()[i] - 100.0) / 10.0, 1e-5);
  }
}

}  // namespace
}  // namespace kiln::pipeline::kernels
