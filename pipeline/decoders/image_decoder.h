// SPDX-License-Identifier: Apache-2.0
// Decodes JPEG (libjpeg-turbo, with DCT-domain scaling and crop decode) and PNG (libspng) images.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"
#include "pipeline/kernels/crop_flip.h"

namespace kiln::pipeline {

enum class ImageFormat { kUnknown, kJpeg, kPng };
enum class ColorFormat { kRGB, kBGR, kGray };

// "RGB", "BGR" or "GRAY" (case-sensitive), else an error naming the value.
Result<ColorFormat> parse_color_format(std::string_view name);
int color_channels(ColorFormat color);

// Looks at the magic bytes only.
ImageFormat detect_image_format(std::span<const uint8_t> bytes);

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int64_t width = 0;
  int64_t height = 0;
};

// Reads the header. Errors name `path` and say why (empty file, not an image, corrupt header).
Result<ImageInfo> read_image_info(std::span<const uint8_t> bytes, std::string_view path);

// A JPEG DCT scaling factor num/denom (1/8 ... 8/8).
struct ScaleFactor {
  int num = 1;
  int denom = 1;
  // ceil(size * num / denom): the scaled size libjpeg produces.
  int64_t apply(int64_t size) const { return (size * num + denom - 1) / denom; }
};

// The smallest of 1/1, 1/2, 1/4 and 1/8 (the factors libjpeg-turbo decodes faster than full size)
// whose scaled `width` x `height` is still at
// least `min_width` x `min_height`; 1/1 when either minimum is 0 (no hint).
ScaleFactor choose_jpeg_scale(int64_t width, int64_t height, int64_t min_width, int64_t min_height);

struct DecodeOptions {
  ColorFormat color = ColorFormat::kRGB;
  // The size the decoded region will be resized to, when known (0: unknown). JPEG decoding then
  // downscales in the DCT domain as far as it can without going below it.
  int64_t min_width = 0;
  int64_t min_height = 0;
};

// Decodes the whole image into a [H, W, C] uint8 tensor (C = 3 for RGB/BGR, 1 for GRAY); H and W
// are the scaled size when DCT scaling applies. A truncated, corrupt, empty or non-image input is
// an error naming `path` and the reason, never a crash.
Result<Tensor> decode_image(std::span<const uint8_t> bytes, std::string_view path,
                            const DecodeOptions& options);

// Decodes only `window` (in full-resolution pixels; it must lie inside the image). JPEG uses
// libjpeg's crop/skip scanlines so the rows and iMCU columns outside the window are not decoded.
// The result covers the window mapped to the chosen scale: [ceil-scaled height, width, C], where
// the minimum size applies to the window.
Result<Tensor> decode_image_window(std::span<const uint8_t> bytes, std::string_view path,
                                   const DecodeOptions& options, const kernels::Window& window);

}  // namespace kiln::pipeline
