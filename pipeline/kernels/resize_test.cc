// SPDX-License-Identifier: Apache-2.0
// Tests the resize kernel against naive reference loops.
#include "pipeline/kernels/resize.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/env.h"
#include "core/mapped_file.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/kernels/kernel_test_util.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline::kernels {
namespace {

using testing::make_pixels;
using testing::Pattern;

Tensor image(int w, int h, int c, Pattern pattern) {
  std::vector<uint8_t> p = make_pixels(w, h, c, pattern);
  Tensor t(DType::kU8, Shape{h, w, c});
  std::copy(p.begin(), p.end(), t.data<uint8_t>());
  return t;
}

Tensor run(const Tensor& in, int out_w, int out_h, Interp interp) {
  Tensor out(DType::kU8, Shape{out_h, out_w, in.shape()[2]});
  resize_u8(in.view(), out.view(), interp);
  return out;
}

uint8_t at(const Tensor& t, int64_t y, int64_t x, int64_t c) {
  return t.data<uint8_t>()[(y * t.shape()[1] + x) * t.shape()[2] + c];
}

// Bilinear with half-pixel centres and clamping, written the textbook way.
double bilinear(const Tensor& in, double sy, double sx, int c) {
  const int64_t h = in.shape()[0], w = in.shape()[1];
  sy = std::clamp(sy, 0.0, static_cast<double>(h - 1));
  sx = std::clamp(sx, 0.0, static_cast<double>(w - 1));
  int64_t y0 = static_cast<int64_t>(std::floor(sy)), x0 = static_cast<int64_t>(std::floor(sx));
  int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  double fy = sy - y0, fx = sx - x0;
  return (1 - fy) * ((1 - fx) * at(in, y0, x0, c) + fx * at(in, y0, x1, c)) +
         fy * ((1 - fx) * at(in, y1, x0, c) + fx * at(in, y1, x1, c));
}

// PIL's antialiased bilinear: a 2-D sum over every source pixel with triangle weights of
// support `scale` along each axis, normalised per axis.
double antialiased(const Tensor& in, int64_t oy, int64_t ox, int c, double scale_y,
                   double scale_x) {
  const int64_t h = in.shape()[0], w = in.shape()[1];
  auto weights = [](int64_t n, double center, double scale) {
    double fs = std::max(scale, 1.0);
    std::vector<double> wts(static_cast<size_t>(n));
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      double d = std::abs((j + 0.5 - center) / fs);
      wts[j] = d < 1 ? 1 - d : 0;
      total += wts[j];
    }
    for (double& v : wts) v /= total;
    return wts;
  };
  std::vector<double> wy = weights(h, (oy + 0.5) * scale_y, scale_y);
  std::vector<double> wx = weights(w, (ox + 0.5) * scale_x, scale_x);
  double acc = 0;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) acc += wy[y] * wx[x] * at(in, y, x, c);
  }
  return acc;
}

TEST(ResizeTest, NearestMatchesReference) {
  for (auto [w, h, ow, oh] : {std::array{7, 5, 3, 2}, std::array{3, 5, 9, 11},
                              std::array{1, 1, 4, 3}, std::array{64, 48, 17, 13}}) {
    Tensor in = image(w, h, 3, Pattern::kGradient);
    Tensor out = run(in, ow, oh, Interp::kNearest);
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        int sy = std::min(static_cast<int>(std::floor((y + 0.5) * h / oh)), h - 1);
        int sx = std::min(static_cast<int>(std::floor((x + 0.5) * w / ow)), w - 1);
        for (int c = 0; c < 3; ++c) ASSERT_EQ(at(out, y, x, c), at(in, sy, sx, c));
      }
    }
  }
}

TEST(ResizeTest, LinearMatchesReferenceUpAndDown) {
  for (auto [w, h, ow, oh] : {std::array{7, 5, 14, 10}, std::array{3, 5, 8, 2},
                              std::array{33, 21, 20, 30}, std::array{1, 1, 3, 3}}) {
    Tensor in = image(w, h, 3, Pattern::kCheckerboard);
    Tensor out = run(in, ow, oh, Interp::kLinear);
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        for (int c = 0; c < 3; ++c) {
          double ref = bilinear(in, (y + 0.5) * h / oh - 0.5, (x + 0.5) * w / ow - 0.5, c);
          ASSERT_NEAR(at(out, y, x, c), ref, 0.51) << w << "x" << h << " y=" << y << " x=" << x;
        }
      }
    }
  }
}

TEST(ResizeTest, AntialiasedMatchesTwoDimensionalReference) {
  for (auto [w, h, ow, oh] :
       {std::array{64, 48, 17, 13}, std::array{31, 29, 8, 29}, std::array{10, 10, 20, 5}}) {
    Tensor in = image(w, h, 1, Pattern::kCheckerboard);
    Tensor out = run(in, ow, oh, Interp::kAntialiased);
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        double ref =
            antialiased(in, y, x, 0, static_cast<double>(h) / oh, static_cast<double>(w) / ow);
        ASSERT_NEAR(at(out, y, x, 0), ref, 0.51) << "y=" << y << " x=" << x;
      }
    }
  }
}

// PIL's antialiased bilinear computed separably in double (columns, then rows): cheap enough for
// the large test image.
std::vector<double> antialiased_separable(const Tensor& in, int64_t oh, int64_t ow) {
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  auto weights = [](int64_t n, int64_t o, int64_t out_n) {
    const double scale = static_cast<double>(n) / static_cast<double>(out_n);
    const double fs = std::max(scale, 1.0), center = (o + 0.5) * scale;
    std::vector<double> wts(static_cast<size_t>(n));
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = std::abs((j + 0.5 - center) / fs);
      wts[j] = d < 1 ? 1 - d : 0;
      total += wts[j];
    }
    for (double& v : wts) v /= total;
    return wts;
  };
  // The first and one past the last non-zero weight.
  auto support = [](const std::vector<double>& wts) {
    auto lo = std::find_if(wts.begin(), wts.end(), [](double v) { return v != 0; });
    auto hi = std::find_if(wts.rbegin(), wts.rend(), [](double v) { return v != 0; });
    return std::pair<int64_t, int64_t>(lo - wts.begin(), wts.rend() - hi);
  };
  std::vector<double> tmp(static_cast<size_t>(h * ow * c), 0.0);
  for (int64_t ox = 0; ox < ow; ++ox) {
    std::vector<double> wx = weights(w, ox, ow);
    auto [x0, x1] = support(wx);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = x0; x < x1; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) tmp[(y * ow + ox) * c + ch] += wx[x] * at(in, y, x, ch);
      }
    }
  }
  std::vector<double> out(static_cast<size_t>(oh * ow * c), 0.0);
  for (int64_t oy = 0; oy < oh; ++oy) {
    std::vector<double> wy = weights(h, oy, oh);
    auto [y0, y1] = support(wy);
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t i = 0; i < ow * c; ++i) out[oy * ow * c + i] += wy[y] * tmp[y * ow * c + i];
    }
  }
  return out;
}

TEST(ResizeTest, LinearAndAntialiasedMatchReferencesOnEveryTestSize) {
  for (const auto& s : test::test_sizes()) {
    Tensor in = test::photo(s.w, s.h, s.c);
    // Down by about 3 across and up by 1.5 down the rows (down for large images), never below 1.
    const int ow = std::max(1, s.w / 3), oh = s.h > 1000 ? s.h / 7 : s.h + s.h / 2;
    Tensor lin = run(in, ow, oh, Interp::kLinear);
    Tensor aa = run(in, ow, oh, Interp::kAntialiased);
    std::vector<double> ref = antialiased_separable(in, oh, ow);
    double worst_aa = 0;
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        for (int c = 0; c < s.c; ++c) {
          const double l = bilinear(in, (y + 0.5) * s.h / oh - 0.5, (x + 0.5) * s.w / ow - 0.5, c);
          ASSERT_NEAR(at(lin, y, x, c), l, 0.51) << s.w << "x" << s.h << " y=" << y << " x=" << x;
          worst_aa = std::max(worst_aa, std::abs(at(aa, y, x, c) - ref[(y * ow + x) * s.c + c]));
        }
      }
    }
    // The kernel rounds to uint8 between its passes, as PIL does.
    EXPECT_LE(worst_aa, 1.01) << s.w << "x" << s.h << "x" << s.c;
  }
}

TEST(ResizeTest, AntialiasingAveragesACheckerboardAwayButNearestDoesNot) {
  Tensor in = image(64, 64, 1, Pattern::kCheckerboard);  // 8-pixel squares of 20 and 230
  Tensor smooth = run(in, 4, 4, Interp::kAntialiased);
  Tensor nearest = run(in, 4, 4, Interp::kNearest);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(at(smooth, y, x, 0), 125, 2);
      EXPECT_TRUE(at(nearest, y, x, 0) == 20 || at(nearest, y, x, 0) == 230);
    }
  }
}

TEST(ResizeTest, SameSizeIsIdentity) {
  Tensor in = image(13, 7, 3, Pattern::kGradient);
  for (Interp interp : {Interp::kNearest, Interp::kLinear, Interp::kAntialiased}) {
    EXPECT_TRUE(run(in, 13, 7, interp).equals(in));
  }
}

// PIL's Image.resize(BILINEAR) is the antialiased triangle filter; it rounds to uint8 between its
// horizontal and vertical passes, so it may differ from ours by one level.
TEST(ResizeTest, AntialiasedMatchesPil) {
  const char* python = env_flag_c_str(EnvFlag::kPython);
  if (*python == '\0' ||
      std::system(fmt::format("{} -c 'import PIL' 2>/dev/null", python).c_str()) != 0) {
    GTEST_SKIP() << "no Python with PIL (set KILN_PYTHON; Debian package python3-pil)";
  }
  testing::TempDir dir;
  struct Case {
    int w, h, c, ow, oh;
  };
  for (Case k : {Case{641, 479, 3, 224, 224}, Case{64, 48, 1, 17, 13}, Case{37, 23, 3, 80, 9}}) {
    Tensor in = image(k.w, k.h, k.c, Pattern::kCheckerboard);
    const std::string src = dir.file(fmt::format("in_{}.png", k.w));
    const std::string dst = dir.file(fmt::format("pil_{}.png", k.w));
    testing::write_bytes(src, testing::encode_png(in.span<uint8_t>(), k.w, k.h, k.c));
    std::string cmd = fmt::format(
        "{} -c 'import sys; from PIL import Image; "
        "Image.open(sys.argv[1]).resize(({}, {}), Image.BILINEAR).save(sys.argv[2])' {} {}",
        python, k.ow, k.oh, src, dst);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto file = MappedFile::open(dst);
    ASSERT_TRUE(file.ok());
    auto pil =
        decode_image((*file)->bytes(), dst, {k.c == 1 ? ColorFormat::kGray : ColorFormat::kRGB});
    ASSERT_TRUE(pil.ok()) << pil.status().to_string();
    Tensor ours = run(in, k.ow, k.oh, Interp::kAntialiased);
    ASSERT_EQ(pil->shape(), ours.shape());
    int worst = 0;
    for (int64_t i = 0; i < ours.numel(); ++i) {
      worst =
          std::max(worst, std::abs(int{ours.data<uint8_t>()[i]} - int{pil->data<uint8_t>()[i]}));
    }
    EXPECT_LE(worst, 1) << k.w << "x" << k.h << " -> " << k.ow << "x" << k.oh;
  }
}

// PIL's BICUBIC is Keys' a = -0.5 with the support widened by the downscale factor.
TEST(ResizeTest, CubicAntialiasedMatchesPil) {
  const char* python = env_flag_c_str(EnvFlag::kPython);
  if (*python == '\0' ||
      std::system(fmt::format("{} -c 'import PIL' 2>/dev/null", python).c_str()) != 0) {
    GTEST_SKIP() << "no Python with PIL (set KILN_PYTHON; Debian package python3-pil)";
  }
  testing::TempDir dir;
  struct Case {
    int w, h, c, ow, oh;
  };
  for (Case k : {Case{641, 479, 3, 224, 224}, Case{64, 48, 1, 17, 13}, Case{37, 23, 3, 80, 9}}) {
    Tensor in = image(k.w, k.h, k.c, Pattern::kGradient);
    const std::string src = dir.file(fmt::format("in_{}.png", k.w));
    const std::string dst = dir.file(fmt::format("pil_{}.png", k.w));
    testing::write_bytes(src, testing::encode_png(in.span<uint8_t>(), k.w, k.h, k.c));
    std::string cmd = fmt::format(
        "{} -c 'import sys; from PIL import Image; "
        "Image.open(sys.argv[1]).resize(({}, {}), Image.BICUBIC).save(sys.argv[2])' {} {}",
        python, k.ow, k.oh, src, dst);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto file = MappedFile::open(dst);
    ASSERT_TRUE(file.ok());
    auto pil =
        decode_image((*file)->bytes(), dst, {k.c == 1 ? ColorFormat::kGray : ColorFormat::kRGB});
    ASSERT_TRUE(pil.ok()) << pil.status().to_string();
    Tensor ours = run(in, k.ow, k.oh, Interp::kCubicAntialiased);
    ASSERT_EQ(pil->shape(), ours.shape());
    int worst = 0;
    double total = 0;
    for (int64_t i = 0; i < ours.numel(); ++i) {
      int d = std::abs(int{ours.data<uint8_t>()[i]} - int{pil->data<uint8_t>()[i]});
      worst = std::max(worst, d);
      total += d;
    }
    EXPECT_LE(worst, 2) << k.w << "x" << k.h << " -> " << k.ow << "x" << k.oh;
    EXPECT_LT(total / static_cast<double>(ours.numel()), 1.0);
  }
}

TEST(ResizeTest, WindowResizeEqualsCropThenResize) {
  Tensor in = image(211, 157, 3, Pattern::kCheckerboard);
  const Window window{13, 27, 101, 77};
  Tensor cropped(DType::kU8, Shape{window.height, window.width, 3});
  crop_hwc(in.view(), cropped.view(), window);
  for (Interp interp : {Interp::kNearest, Interp::kLinear, Interp::kAntialiased, Interp::kCubic,
                        Interp::kCubicAntialiased}) {
    Tensor a(DType::kU8, Shape{50, 60, 3}), b(DType::kU8, Shape{50, 60, 3});
    resize_window_u8(in.view(), window, a.view(), interp);
    resize_u8(cropped.view(), b.view(), interp);
    EXPECT_TRUE(a.equals(b)) << static_cast<int>(interp);
  }
}

TEST(ResizeTest, CubicUpscaleKeepsFlatImagesFlatAndOneByOneWorks) {
  Tensor flat(DType::kU8, Shape{7, 9, 3});
  std::fill(flat.data<uint8_t>(), flat.data<uint8_t>() + flat.numel(), 200);
  Tensor up = run(flat, 31, 23, Interp::kCubic);
  for (uint8_t v : up.span<uint8_t>()) ASSERT_EQ(v, 200);
  Tensor one(DType::kU8, Shape{1, 1, 1});
  one.data<uint8_t>()[0] = 17;
  for (Interp interp : {Interp::kNearest, Interp::kLinear, Interp::kAntialiased, Interp::kCubic}) {
    Tensor big = run(one, 5, 4, interp);
    for (uint8_t v : big.span<uint8_t>()) ASSERT_EQ(v, 17);
    Tensor same = run(one, 1, 1, interp);
    EXPECT_EQ(same.data<uint8_t>()[0], 17);
  }
}

}  // namespace
}  // namespace kiln::pipeline::kernels
