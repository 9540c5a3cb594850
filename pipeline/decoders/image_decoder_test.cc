// SPDX-License-Identifier: Apache-2.0
// Tests JPEG and PNG decoding on files encoded by libjpeg-turbo and libspng, and bad inputs.
#include "pipeline/decoders/image_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>

#include "core/mapped_file.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using testing::encode_jpeg;
using testing::encode_png;
using ::testing::HasSubstr;
using testing::make_pixels;
using testing::Pattern;

std::span<const uint8_t> as_span(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}

// The largest absolute difference between a decoded image and the expected pixels.
int max_diff(const Tensor& t, const std::vector<uint8_t>& expected) {
  EXPECT_EQ(static_cast<size_t>(t.numel()), expected.size());
  int worst = 0;
  for (size_t i = 0; i < expected.size() && i < static_cast<size_t>(t.numel()); ++i) {
    worst = std::max(worst, std::abs(int{t.data<uint8_t>()[i]} - int{expected[i]}));
  }
  return worst;
}

double mean_diff(const Tensor& t, const std::vector<uint8_t>& expected) {
  double total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    total += std::abs(int{t.data<uint8_t>()[i]} - int{expected[i]});
  }
  return total / static_cast<double>(expected.size());
}

struct Size {
  int w, h, c;
};

TEST(ImageDecoderTest, PngRoundTripIsExact) {
  for (Size s : {Size{1, 1, 3}, Size{3, 5, 3}, Size{641, 479, 3}, Size{3, 5, 1}, Size{17, 9, 1}}) {
    for (Pattern pattern : {Pattern::kGradient, Pattern::kCheckerboard}) {
      std::vector<uint8_t> pixels = make_pixels(s.w, s.h, s.c, pattern);
      std::vector<uint8_t> png = encode_png(pixels, s.w, s.h, s.c);
      DecodeOptions options;
      options.color = s.c == 1 ? ColorFormat::kGray : ColorFormat::kRGB;
      auto decoded = decode_image(as_span(png), "x.png", options);
      ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
      EXPECT_EQ(decoded->shape(), Shape({s.h, s.w, s.c}));
      EXPECT_EQ(max_diff(*decoded, pixels), 0) << s.w << "x" << s.h << "x" << s.c;
    }
  }
}

TEST(ImageDecoderTest, PngColorConversions) {
  std::vector<uint8_t> rgb = make_pixels(6, 4, 3, Pattern::kGradient);
  std::vector<uint8_t> png = encode_png(rgb, 6, 4, 3);
  auto bgr = decode_image(as_span(png), "x.png", {ColorFormat::kBGR});
  auto gray = decode_image(as_span(png), "x.png", {ColorFormat::kGray});
  ASSERT_TRUE(bgr.ok() && gray.ok());
  ASSERT_EQ(gray->shape(), Shape({4, 6, 1}));
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(bgr->data<uint8_t>()[i * 3], rgb[i * 3 + 2]);
    EXPECT_EQ(bgr->data<uint8_t>()[i * 3 + 2], rgb[i * 3]);
    double luma = 0.299 * rgb[i * 3] + 0.587 * rgb[i * 3 + 1] + 0.114 * rgb[i * 3 + 2];
    EXPECT_NEAR(gray->data<uint8_t>()[i], luma, 1.0);
  }
  std::vector<uint8_t> g = make_pixels(5, 3, 1, Pattern::kGradient);
  auto gray_as_rgb = decode_image(as_span(encode_png(g, 5, 3, 1)), "g.png", {ColorFormat::kRGB});
  ASSERT_TRUE(gray_as_rgb.ok());
  ASSERT_EQ(gray_as_rgb->shape(), Shape({3, 5, 3}));
  for (int i = 0; i < 15; ++i) EXPECT_EQ(gray_as_rgb->data<uint8_t>()[i * 3 + 1], g[i]);
}

TEST(ImageDecoderTest, JpegRoundTripIsClose) {
  for (Size s : {Size{1, 1, 3}, Size{3, 5, 3}, Size{641, 479, 3}, Size{3, 5, 1}, Size{64, 40, 1}}) {
    std::vector<uint8_t> pixels = make_pixels(s.w, s.h, s.c, Pattern::kGradient);
    std::vector<uint8_t> jpeg = encode_jpeg(pixels, s.w, s.h, s.c, 98);
    DecodeOptions options;
    options.color = s.c == 1 ? ColorFormat::kGray : ColorFormat::kRGB;
    auto decoded = decode_image(as_span(jpeg), "x.jpg", options);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    EXPECT_EQ(decoded->shape(), Shape({s.h, s.w, s.c}));
    EXPECT_LE(max_diff(*decoded, pixels), 12) << s.w << "x" << s.h;
    EXPECT_LE(mean_diff(*decoded, pixels), 2.0) << s.w << "x" << s.h;
  }
}

TEST(ImageDecoderTest, JpegBgrIsRgbReversed) {
  std::vector<uint8_t> pixels = make_pixels(16, 8, 3, Pattern::kGradient);
  std::vector<uint8_t> jpeg = encode_jpeg(pixels, 16, 8, 3);
  auto rgb = decode_image(as_span(jpeg), "x.jpg", {ColorFormat::kRGB});
  auto bgr = decode_image(as_span(jpeg), "x.jpg", {ColorFormat::kBGR});
  ASSERT_TRUE(rgb.ok() && bgr.ok());
  for (int i = 0; i < 16 * 8; ++i) {
    EXPECT_EQ(rgb->data<uint8_t>()[i * 3], bgr->data<uint8_t>()[i * 3 + 2]);
    EXPECT_EQ(rgb->data<uint8_t>()[i * 3 + 1], bgr->data<uint8_t>()[i * 3 + 1]);
  }
}

TEST(ImageDecoderTest, ChoosesTheSmallestDctScaleAtLeastTheTarget) {
  EXPECT_EQ(choose_jpeg_scale(640, 480, 0, 0).num, 8);
  EXPECT_EQ(choose_jpeg_scale(640, 480, 160, 120).num, 2);  // 1/4: exactly 160x120
  EXPECT_EQ(choose_jpeg_scale(640, 480, 161, 120).num, 4);  // 1/2: 3/8 would fit, but is slow
  EXPECT_EQ(choose_jpeg_scale(640, 480, 400, 300).num, 8);  // 5/8 would fit, but is slow
  EXPECT_EQ(choose_jpeg_scale(640, 480, 80, 60).num, 1);    // 1/8
  EXPECT_EQ(choose_jpeg_scale(640, 480, 700, 100).num, 8);  // never upscales
  ScaleFactor f{3, 8};
  EXPECT_EQ(f.apply(641), 241);  // ceil(641 * 3 / 8)
}

TEST(ImageDecoderTest, JpegDctScalingDecodesSmallerImage) {
  std::vector<uint8_t> pixels = make_pixels(641, 479, 3, Pattern::kGradient);
  std::vector<uint8_t> jpeg = encode_jpeg(pixels, 641, 479, 3);
  DecodeOptions options;
  options.min_width = 150;
  options.min_height = 100;
  auto decoded = decode_image(as_span(jpeg), "x.jpg", options);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->shape(), Shape({120, 161, 3}));  // 1/4 scale, rounded up
  // A gradient stays a gradient: pixel (y, x) of the scaled image ~ source (4y+1.5, 4x+1.5).
  for (int y = 0; y < 120; y += 17) {
    for (int x = 0; x < 160; x += 23) {
      int sy = std::min(4 * y + 2, 478), sx = std::min(4 * x + 2, 640);
      EXPECT_NEAR(decoded->data<uint8_t>()[(y * 161 + x) * 3], pixels[(sy * 641 + sx) * 3], 4);
    }
  }
}

TEST(ImageDecoderTest, JpegWindowDecodeMatchesFullDecodeCropped) {
  std::vector<uint8_t> pixels = make_pixels(641, 479, 3, Pattern::kCheckerboard);
  std::vector<uint8_t> jpeg = encode_jpeg(pixels, 641, 479, 3, 90);
  auto full = decode_image(as_span(jpeg), "x.jpg", {});
  ASSERT_TRUE(full.ok());
  for (kernels::Window w : {kernels::Window{0, 0, 479, 641}, kernels::Window{37, 101, 200, 333},
                            kernels::Window{478, 640, 1, 1}, kernels::Window{13, 7, 100, 9}}) {
    auto part = decode_image_window(as_span(jpeg), "x.jpg", {}, w);
    ASSERT_TRUE(part.ok()) << part.status().to_string();
    ASSERT_EQ(part->shape(), Shape({w.height, w.width, 3}));
    int worst = 0;
    for (int64_t y = 0; y < w.height; ++y) {
      for (int64_t x = 0; x < w.width * 3; ++x) {
        int a = part->data<uint8_t>()[y * w.width * 3 + x];
        int b = full->data<uint8_t>()[((w.y + y) * 641 + w.x) * 3 + x];
        worst = std::max(worst, std::abs(a - b));
      }
    }
    // Fancy upsampling at the window's edge may differ by a little from the full decode.
    EXPECT_LE(worst, 3) << w.x << "," << w.y;
  }
}

TEST(ImageDecoderTest, JpegSubsampledAndProgressiveWindowsMatchFullDecode) {
  std::vector<uint8_t> pixels = make_pixels(301, 203, 3, Pattern::kGradient);
  struct Variant {
    int subsamp;
    int flags;
  };
  for (Variant v :
       {Variant{TJSAMP_420, 0}, Variant{TJSAMP_422, 0}, Variant{TJSAMP_420, TJFLAG_PROGRESSIVE},
        Variant{TJSAMP_444, TJFLAG_PROGRESSIVE}}) {
    std::vector<uint8_t> jpeg = encode_jpeg(pixels, 301, 203, 3, 95, v.subsamp, v.flags);
    auto full = decode_image(as_span(jpeg), "x.jpg", {});
    ASSERT_TRUE(full.ok()) << full.status().to_string();
    EXPECT_LE(mean_diff(*full, pixels), 2.0) << v.subsamp << " " << v.flags;
    for (kernels::Window w : {kernels::Window{17, 33, 120, 150}, kernels::Window{0, 0, 203, 301},
                              kernels::Window{100, 250, 103, 51}}) {
      auto part = decode_image_window(as_span(jpeg), "x.jpg", {}, w);
      ASSERT_TRUE(part.ok()) << part.status().to_string();
      ASSERT_EQ(part->shape(), Shape({w.height, w.width, 3}));
      double total = 0;
      int worst = 0;
      for (int64_t y = 0; y < w.height; ++y) {
        for (int64_t x = 0; x < w.width * 3; ++x) {
          int a = part->data<uint8_t>()[y * w.width * 3 + x];
          int b = full->data<uint8_t>()[((w.y + y) * 301 + w.x) * 3 + x];
          worst = std::max(worst, std::abs(a - b));
          total += std::abs(a - b);
        }
      }
      EXPECT_LE(worst, 4) << v.subsamp << " " << v.flags << " at " << w.x << "," << w.y;
      EXPECT_LE(total / static_cast<double>(part->numel()), 0.2);
    }
  }
}

TEST(ImageDecoderTest, JpegWindowDecodeWithScaleAndPngWindow) {
  std::vector<uint8_t> pixels = make_pixels(400, 300, 3, Pattern::kGradient);
  std::vector<uint8_t> jpeg = encode_jpeg(pixels, 400, 300, 3);
  DecodeOptions options;
  options.min_width = 50;
  options.min_height = 50;
  kernels::Window w{100, 200, 200, 200};
  auto part = decode_image_window(as_span(jpeg), "x.jpg", options, w);
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  EXPECT_EQ(part->shape(), Shape({50, 50, 3}));  // 1/4 of the 200x200 window
  EXPECT_NEAR(part->data<uint8_t>()[0], pixels[(102 * 400 + 202) * 3], 4);

  std::vector<uint8_t> png = encode_png(pixels, 400, 300, 3);
  auto png_part = decode_image_window(as_span(png), "x.png", options, w);
  ASSERT_TRUE(png_part.ok());
  ASSERT_EQ(png_part->shape(), Shape({200, 200, 3}));  // PNG has no DCT scaling
  EXPECT_EQ(png_part->data<uint8_t>()[(5 * 200 + 7) * 3 + 1], pixels[(105 * 400 + 207) * 3 + 1]);

  auto outside = decode_image_window(as_span(png), "x.png", options, {250, 0, 100, 10});
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("outside the 400x300 image"));
}

TEST(ImageDecoderTest, BadInputsAreErrorsNamingPathAndReason) {
  std::vector<uint8_t> pixels = make_pixels(64, 64, 3, Pattern::kGradient);
  std::vector<uint8_t> jpeg = encode_jpeg(pixels, 64, 64, 3);
  std::vector<uint8_t> png = encode_png(pixels, 64, 64, 3);
  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
    std::string reason;
  };
  std::vector<uint8_t> corrupt_png = png;
  corrupt_png[40] ^= 0xff;  // inside the IDAT chunk: its CRC no longer matches
  std::vector<uint8_t> corrupt_jpeg = jpeg;
  for (size_t i = jpeg.size() / 2; i < jpeg.size() / 2 + 64; ++i) corrupt_jpeg[i] = 0xff;
  std::vector<Case> cases = {
      {"empty.jpg", {}, "empty file"},
      {"text.jpg", {'h', 'e', 'l', 'l', 'o'}, "not a JPEG or PNG file (starts with bytes 68 65"},
      {"trunc.jpg", {jpeg.begin(), jpeg.begin() + jpeg.size() / 2}, "corrupt or truncated JPEG"},
      {"header_only.jpg", {jpeg.begin(), jpeg.begin() + 20}, "corrupt or truncated JPEG"},
      {"corrupt.jpg", corrupt_jpeg, "corrupt or truncated JPEG"},
      {"trunc.png", {png.begin(), png.begin() + png.size() / 2}, "corrupt or truncated PNG"},
      {"header_only.png", {png.begin(), png.begin() + 12}, "corrupt or truncated PNG"},
      {"corrupt.png", corrupt_png, "corrupt or truncated PNG"},
  };
  for (const Case& c : cases) {
    auto decoded = decode_image(as_span(c.bytes), c.name, {});
    ASSERT_FALSE(decoded.ok()) << c.name;
    EXPECT_THAT(decoded.status().message(), HasSubstr("\"" + c.name + "\"")) << c.name;
    EXPECT_THAT(decoded.status().message(), HasSubstr(c.reason)) << c.name;
    if (c.bytes.size() > 40) {
      auto window = decode_image_window(as_span(c.bytes), c.name, {}, {0, 0, 64, 64});
      ASSERT_FALSE(window.ok()) << c.name;
      EXPECT_THAT(window.status().message(), HasSubstr(c.reason)) << c.name;
    }
  }
}

TEST(ImageDecoderTest, DetectsFormatsAndReadsHeaders) {
  std::vector<uint8_t> pixels = make_pixels(7, 3, 3, Pattern::kGradient);
  auto jpeg_info = read_image_info(as_span(encode_jpeg(pixels, 7, 3, 3)), "a.jpg");
  auto png_info = read_image_info(as_span(encode_png(pixels, 7, 3, 3)), "a.png");
  ASSERT_TRUE(jpeg_info.ok() && png_info.ok());
  EXPECT_EQ(jpeg_info->format, ImageFormat::kJpeg);
  EXPECT_EQ(png_info->format, ImageFormat::kPng);
  EXPECT_EQ(jpeg_info->width, 7);
  EXPECT_EQ(png_info->height, 3);
  EXPECT_FALSE(parse_color_format("rgb").ok());
}

}  // namespace
}  // namespace kiln::pipeline
