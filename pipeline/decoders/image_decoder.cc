// SPDX-License-Identifier: Apache-2.0
// Format detection and dispatch to the JPEG and PNG decoders.
#include "pipeline/decoders/image_decoder.h"

#include <fmt/format.h>

#include <cstring>

#include "pipeline/decoders/codecs.h"

namespace kiln::pipeline {
namespace {

Status not_an_image(std::span<const uint8_t> bytes, std::string_view path) {
  if (bytes.empty()) return invalid_argument_error(fmt::format("image \"{}\": empty file", path));
  std::string head;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    head += fmt::format("{}{:02x}", i ? " " : "", bytes[i]);
  }
  return invalid_argument_error(
      fmt::format("image \"{}\": not a JPEG or PNG file (starts with bytes {})", path, head));
}

}  // namespace

Result<ColorFormat> parse_color_format(std::string_view name) {
  if (name == "RGB") return ColorFormat::kRGB;
  if (name == "BGR") return ColorFormat::kBGR;
  if (name == "GRAY") return ColorFormat::kGray;
  return invalid_argument_error(
      fmt::format("color format \"{}\": expected RGB, BGR or GRAY", name));
}

int color_channels(ColorFormat color) {
  return color == ColorFormat::kGray ? 1 : 3;
}

ImageFormat detect_image_format(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Result<ImageInfo> read_image_info(std::span<const uint8_t> bytes, std::string_view path) {
  switch (detect_image_format(bytes)) {
    case ImageFormat::kJpeg: return detail::jpeg_info(bytes, path);
    case ImageFormat::kPng: return detail::png_info(bytes, path);
    case ImageFormat::kUnknown: break;
  }
  return not_an_image(bytes, path);
}

ScaleFactor choose_jpeg_scale(int64_t width, int64_t height, int64_t min_width,
                              int64_t min_height) {
  ScaleFactor best{8, 8};
  if (min_width <= 0 || min_height <= 0) return best;
  // Only the halvings: libjpeg-turbo has SIMD IDCTs for 8/8, 4/8, 2/8 and 1/8, while 3/8 to 7/8
  // run generic C IDCTs (and larger chroma IDCTs) that are slower than a full-size decode
  // (measured on the benchmark's JPEGs: 7/8 and 6/8 take ~1.4x the time of 8/8).
  for (int num = 4; num >= 1; num /= 2) {
    ScaleFactor f{num, 8};
    if (f.apply(width) < min_width || f.apply(height) < min_height) break;
    best = f;
  }
  return best;
}

Result<Tensor> decode_image(std::span<const uint8_t> bytes, std::string_view path,
                            const DecodeOptions& options) {
  switch (detect_image_format(bytes)) {
    case ImageFormat::kJpeg: return detail::decode_jpeg(bytes, path, options);
    case ImageFormat::kPng: return detail::decode_png(bytes, path, options.color);
    case ImageFormat::kUnknown: break;
  }
  return not_an_image(bytes, path);
}

Result<Tensor> decode_image_window(std::span<const uint8_t> bytes, std::string_view path,
                                   const DecodeOptions& options, const kernels::Window& window) {
  KILN_ASSIGN_OR_RETURN(ImageInfo info, read_image_info(bytes, path));
  if (window.x < 0 || window.y < 0 || window.width <= 0 || window.height <= 0 ||
      window.x + window.width > info.width || window.y + window.height > info.height) {
    return invalid_argument_error(
        fmt::format("image \"{}\": crop window {}x{} at ({},{}) is outside the {}x{} image", path,
                    window.width, window.height, window.x, window.y, info.width, info.height));
  }
  if (info.format == ImageFormat::kJpeg) {
    return detail::decode_jpeg_window(bytes, path, options, window);
  }
  KILN_ASSIGN_OR_RETURN(Tensor full, detail::decode_png(bytes, path, options.color));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DType::kU8, Shape{window.height, window.width,
                                                                       full.shape()[2]}));
  kernels::crop_hwc(full.view(), out.view(), window);
  return out;
}

}  // namespace kiln::pipeline
