// SPDX-License-Identifier: Apache-2.0
// Tests of ImageDecoder's own readers (BMP, PNM) on hand-made files, and of every format's answer
// to bytes that are cut short or not an image: an error naming the format, never a crash.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {
namespace {

Result<Tensor> decode(const std::string& bytes, std::string pixel_format = "RGB") {
  Graph g("t");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kU8, {Dim()}));
  ops::ImageDecoder op;
  op.pixel_format = std::move(pixel_format);
  b.output(b.add(op, {x}, "decode"));
  KILN_RETURN_IF_ERROR(b.status());
  std::vector<uint8_t> data(bytes.begin(), bytes.end());
  ref::Interpreter interpreter;
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> out,
                        interpreter.run(g, {Argument(Tensor::from_vector(data))}));
  return out[0].tensor();
}

std::vector<int> values(const Tensor& t) {
  return {t.data<uint8_t>(), t.data<uint8_t>() + t.numel()};
}

TEST(ImageDecoder, ReadsBinaryAndTextPnm) {
  // 2x1 pixels: red and (10, 20, 30); maxval 255.
  const std::string p6 =
      std::string("P6\n# a comment\n2 1\n255\n") + std::string("\xff\x00\x00\x0a\x14\x1e", 6);
  Result<Tensor> rgb = decode(p6);
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  EXPECT_EQ(rgb->shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(values(*rgb), (std::vector<int>{255, 0, 0, 10, 20, 30}));
  Result<Tensor> bgr = decode(p6, "BGR");
  ASSERT_TRUE(bgr.ok());
  EXPECT_EQ(values(*bgr), (std::vector<int>{0, 0, 255, 30, 20, 10}));
  // A gray text PNM with maxval 4 scales to 0..255; Grayscale keeps one channel.
  Result<Tensor> gray = decode("P2 3 1 4\n0 2 4\n", "Grayscale");
  ASSERT_TRUE(gray.ok()) << gray.status().to_string();
  EXPECT_EQ(gray->shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(values(*gray), (std::vector<int>{0, 128, 255}));
}

TEST(ImageDecoder, ReadsA24BitBottomUpBmp) {
  // 2x2, rows bottom-up, each padded to 8 bytes; pixels stored as BGR.
  auto le32 = [](uint32_t v) {
    return std::string{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 24)};
  };
  std::string bmp = "BM" + le32(54 + 16) + le32(0) + le32(54);
  bmp += le32(40) + le32(2) + le32(2) + std::string("\x01\x00\x18\x00", 4) + le32(0) + le32(16) +
         le32(0) + le32(0) + le32(0) + le32(0);
  bmp += std::string("\x03\x02\x01\x06\x05\x04\0\0", 8);  // bottom row: (1,2,3) (4,5,6)
  bmp += std::string("\x09\x08\x07\x0c\x0b\x0a\0\0", 8);  // top row: (7,8,9) (10,11,12)
  Result<Tensor> rgb = decode(bmp);
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  EXPECT_EQ(rgb->shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(*rgb), (std::vector<int>{7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6}));
  // Grayscale from RGB as Pillow converts: (299 R + 587 G + 114 B) / 1000, rounded.
  Result<Tensor> gray = decode(bmp, "Grayscale");
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(values(*gray), (std::vector<int>{8, 11, 2, 5}));
  EXPECT_FALSE(decode(bmp.substr(0, 60)).ok());  // pixels cut short
}

TEST(ImageDecoder, CutOrForeignBytesAreClearErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string("\xff\xd8\xff\xe0\x00\x10JFIF", 10), "JPEG"},
      {std::string("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", 16), "PNG"},
      {std::string("RIFF\x10\x00\x00\x00WEBPVP8 ", 16), "WebP"},
      {std::string("II*\x00\x08\x00\x00\x00", 8), "TIFF"},
      {std::string("\x00\x00\x00\x0cjP  \r\n\x87\n\x00\x00", 14), "JPEG 2000"},
      {std::string("\xff\x4f\xff\x51\x00", 5), "JPEG 2000"},
      {"BM1234", "BMP"},
      {"P6\n2 2\n255\n\x01", "PNM"},
      {"P6\n2 2\n65535\n", "PNM"},
      {"GIF89a", "not an image kiln decodes"},
      {"", "not an image kiln decodes"},
  };
  for (const auto& [bytes, says] : cases) {
    Result<Tensor> y = decode(bytes);
    ASSERT_FALSE(y.ok()) << says;
    EXPECT_NE(y.status().message().find(says), std::string::npos) << y.status().message();
    EXPECT_NE(y.status().message().find("ImageDecoder"), std::string::npos) << y.status().message();
  }
}

}  // namespace
}  // namespace kiln::compiler
