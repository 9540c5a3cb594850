// SPDX-License-Identifier: Apache-2.0
// Tests JPEG and PNG decoding on files encoded by libjpeg-turbo and libspng, and bad inputs.
#include "pipeline/decoders/image_decoder.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libdeflate.h>
#include <turbojpeg.h>

#include <cmath>
#include <random>

#include "core/mapped_file.h"
#include "pipeline/decoders/codecs.h"
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

// A PNG written here byte by byte: 8-bit, color type `color_type` (0, 2, 4 or 6), row y filtered
// with filter y % 5 (or `filter` for every row when it is set), the zlib stream split into IDAT
// chunks of `chunk` bytes.
std::vector<uint8_t> write_png(const std::vector<uint8_t>& pixels, int w, int h, int color_type,
                               int chunk, int filter = -1) {
  const int bpp = color_type == 0 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : 4;
  const int stride = w * bpp;
  std::vector<uint8_t> raw;
  for (int y = 0; y < h; ++y) {
    const int type = filter >= 0 ? filter : y % 5;
    raw.push_back(static_cast<uint8_t>(type));
    const uint8_t* cur = pixels.data() + y * stride;
    const uint8_t* prev = y > 0 ? cur - stride : nullptr;
    for (int i = 0; i < stride; ++i) {
      const int a = i >= bpp ? cur[i - bpp] : 0, b = prev ? prev[i] : 0;
      const int c = prev && i >= bpp ? prev[i - bpp] : 0;
      const int p = a + b - c;
      const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      const int predictors[] = {0, a, b, (a + b) / 2, pa <= pb && pa <= pc ? a : pb <= pc ? b : c};
      raw.push_back(static_cast<uint8_t>(cur[i] - (type < 5 ? predictors[type] : 0)));
    }
  }
  libdeflate_compressor* compressor = libdeflate_alloc_compressor(6);
  std::vector<uint8_t> z(libdeflate_zlib_compress_bound(compressor, raw.size()));
  z.resize(libdeflate_zlib_compress(compressor, raw.data(), raw.size(), z.data(), z.size()));
  libdeflate_free_compressor(compressor);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto put32 = [&](uint32_t v) {
    for (int shift : {24, 16, 8, 0}) png.push_back(static_cast<uint8_t>(v >> shift));
  };
  auto put_chunk = [&](const char* type, const uint8_t* data, size_t n) {
    put32(static_cast<uint32_t>(n));
    const size_t start = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data, data + n);
    put32(libdeflate_crc32(0, png.data() + start, n + 4));
  };
  const uint8_t ihdr[] = {0, 0,
                          0, static_cast<uint8_t>(w),
                          0, 0,
                          0, static_cast<uint8_t>(h),
                          8, static_cast<uint8_t>(color_type),
                          0, 0,
                          0};
  put_chunk("IHDR", ihdr, sizeof(ihdr));
  for (size_t at = 0; at < z.size(); at += static_cast<size_t>(chunk)) {
    put_chunk("IDAT", z.data() + at, std::min(z.size() - at, static_cast<size_t>(chunk)));
  }
  put_chunk("IEND", nullptr, 0);
  return png;
}

TEST(ImageDecoderTest, PngOfEveryFilterAndEightBitColourTypeDecodesExactly) {
  // Rows filtered with each of the five filters, zlib streams in one or many IDAT chunks; every
  // colour type the libdeflate path takes, into each output format, against libspng's rules:
  // gray repeated into RGB, alpha dropped, BT.601 luma for gray from colour.
  std::mt19937 rng(5);
  const int w = 13, h = 11;
  for (int color_type : {0, 4, 2, 6}) {
    const int bpp = color_type == 0 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : 4;
    std::vector<uint8_t> pixels(static_cast<size_t>(w * h * bpp));
    for (uint8_t& v : pixels) v = static_cast<uint8_t>(rng());
    for (int chunk : {1 << 20, 97, 1}) {
      SCOPED_TRACE(fmt::format("colour type {}, IDAT chunks of {} bytes", color_type, chunk));
      std::vector<uint8_t> png = write_png(pixels, w, h, color_type, chunk);
      for (ColorFormat color : {ColorFormat::kRGB, ColorFormat::kBGR, ColorFormat::kGray}) {
        // The libdeflate path itself takes it, and decode_image gives what it gives.
        std::optional<Tensor> fast = detail::decode_simple_png(as_span(png), color);
        ASSERT_TRUE(fast.has_value());
        auto decoded = decode_image(as_span(png), "f.png", {color});
        ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
        EXPECT_TRUE(decoded->equals(*fast));
        const int channels = color == ColorFormat::kGray ? 1 : 3;
        ASSERT_EQ(decoded->shape(), Shape({h, w, channels}));
        std::vector<uint8_t> expected;
        for (int i = 0; i < w * h; ++i) {
          const uint8_t* p = pixels.data() + i * bpp;
          if (bpp <= 2) {
            expected.insert(expected.end(), static_cast<size_t>(channels), p[0]);
          } else if (color == ColorFormat::kGray) {
            expected.push_back(static_cast<uint8_t>(
                (19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16));
          } else if (color == ColorFormat::kBGR) {
            expected.insert(expected.end(), {p[2], p[1], p[0]});
          } else {
            expected.insert(expected.end(), {p[0], p[1], p[2]});
          }
        }
        EXPECT_EQ(max_diff(*decoded, expected), 0) << static_cast<int>(color);
      }
    }
  }
}

TEST(ImageDecoderTest, PngFaultsTheFastPathFindsAreLibspngsErrors) {
  std::vector<uint8_t> pixels(7 * 5 * 3, 77);
  std::vector<uint8_t> bad_filter = write_png(pixels, 7, 5, 2, 1 << 20, 5);
  std::vector<uint8_t> bad_crc = write_png(pixels, 7, 5, 2, 4);
  bad_crc[8 + 25 + 12 + 4 + 8 + 2] ^= 0x40;  // in the second IDAT chunk's data
  std::vector<uint8_t> split = write_png(pixels, 7, 5, 2, 4);
  // An ancillary chunk between two IDATs: IDATs must be consecutive.
  const uint8_t text[] = {0, 0, 0, 1, 't', 'E', 'X', 't', 'a', 0, 0, 0, 0};
  split.insert(split.begin() + 8 + 25 + 16, std::begin(text), std::end(text));
  std::vector<uint8_t> short_stream = write_png(pixels, 7, 4, 2, 1 << 20);
  short_stream[8 + 8 + 7] = 5;  // IHDR says 5 rows where the stream holds 4
  const uint32_t crc = libdeflate_crc32(0, short_stream.data() + 12, 17);
  for (int i = 0; i < 4; ++i) short_stream[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  EXPECT_TRUE(detail::decode_simple_png(as_span(write_png(pixels, 7, 5, 2, 4)), {}).has_value());
  for (const auto& [name, bytes] :
       {std::pair{"filter.png", bad_filter}, std::pair{"crc.png", bad_crc},
        std::pair{"split.png", split}, std::pair{"short.png", short_stream}}) {
    EXPECT_FALSE(detail::decode_simple_png(as_span(bytes), {}).has_value()) << name;
    auto decoded = decode_image(as_span(bytes), name, {});
    ASSERT_FALSE(decoded.ok()) << name;
    EXPECT_THAT(decoded.status().message(), HasSubstr("corrupt or truncated PNG")) << name;
  }
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
