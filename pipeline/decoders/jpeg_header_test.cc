// SPDX-License-Identifier: Apache-2.0
// Tests the JPEG marker walk on files libjpeg-turbo writes, and on bytes that are not JPEGs.
#include "pipeline/decoders/jpeg_header.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

std::vector<uint8_t> jpeg(int w, int h, int channels, int subsamp, int flags = 0) {
  return testing::encode_jpeg(testing::make_pixels(w, h, channels, testing::Pattern::kGradient), w,
                              h, channels, 90, subsamp, flags);
}

TEST(JpegHeaderTest, ReadsSizeSamplingAndCoding) {
  struct Case {
    int subsamp;
    int h0, v0;
    bool hardware;
  };
  for (const Case& c :
       {Case{TJSAMP_444, 1, 1, true}, Case{TJSAMP_422, 2, 1, true}, Case{TJSAMP_420, 2, 2, true},
        Case{TJSAMP_440, 1, 2, true}, Case{TJSAMP_411, 4, 1, false}}) {
    auto header = read_jpeg_header(jpeg(37, 21, 3, c.subsamp));
    ASSERT_TRUE(header.has_value()) << c.subsamp;
    EXPECT_EQ(header->width, 37);
    EXPECT_EQ(header->height, 21);
    EXPECT_EQ(header->components, 3);
    EXPECT_EQ(header->h_sampling[0], c.h0) << c.subsamp;
    EXPECT_EQ(header->v_sampling[0], c.v0) << c.subsamp;
    EXPECT_TRUE(header->huffman_sequential);
    EXPECT_FALSE(header->progressive);
    EXPECT_EQ(header->hardware_decodable(), c.hardware) << c.subsamp;
  }
  auto gray = read_jpeg_header(jpeg(5, 300, 1, TJSAMP_GRAY));
  ASSERT_TRUE(gray.has_value());
  EXPECT_EQ(gray->components, 1);
  EXPECT_TRUE(gray->hardware_decodable());
  auto progressive = read_jpeg_header(jpeg(64, 48, 3, TJSAMP_420, TJFLAG_PROGRESSIVE));
  ASSERT_TRUE(progressive.has_value());
  EXPECT_TRUE(progressive->progressive);
  EXPECT_FALSE(progressive->hardware_decodable());
}

TEST(JpegHeaderTest, NonJpegAndTruncatedBytesHaveNoHeader) {
  std::vector<uint8_t> bytes = jpeg(16, 16, 3, TJSAMP_420);
  EXPECT_FALSE(read_jpeg_header({}).has_value());
  EXPECT_FALSE(read_jpeg_header(std::span(bytes).first(3)).has_value());
  EXPECT_FALSE(read_jpeg_header(std::span(bytes).first(30)).has_value());
  std::vector<uint8_t> png =
      testing::encode_png(testing::make_pixels(4, 4, 3, testing::Pattern::kGradient), 4, 4, 3);
  EXPECT_FALSE(read_jpeg_header(png).has_value());
  bytes[2] = 0x00;  // the first marker is broken
  EXPECT_FALSE(read_jpeg_header(bytes).has_value());
}

}  // namespace
}  // namespace kiln::pipeline
