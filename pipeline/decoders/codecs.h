// SPDX-License-Identifier: Apache-2.0
// The per-format decoders behind decode_image(); internal to pipeline/decoders.
#pragma once

#include <optional>

#include "pipeline/decoders/image_decoder.h"

namespace kiln::pipeline::detail {

// Images with more pixels than this are refused before any allocation.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

Result<ImageInfo> jpeg_info(std::span<const uint8_t> bytes, std::string_view path);
Result<ImageInfo> png_info(std::span<const uint8_t> bytes, std::string_view path);

Result<Tensor> decode_jpeg(std::span<const uint8_t> bytes, std::string_view path,
                           const DecodeOptions& options);
Result<Tensor> decode_jpeg_window(std::span<const uint8_t> bytes, std::string_view path,
                                  const DecodeOptions& options, const kernels::Window& window);
Result<Tensor> decode_png(std::span<const uint8_t> bytes, std::string_view path, ColorFormat color);
// decode_png's fast path: an 8-bit, non-interlaced gray, gray-alpha, RGB or RGBA PNG whose chunks
// and zlib stream are sound, inflated by libdeflate and unfiltered here; nullopt for any other
// PNG and for any fault (decode_png then leaves it to libspng, which decodes it or names the
// fault).
std::optional<Tensor> decode_simple_png(std::span<const uint8_t> bytes, ColorFormat color);
// decode_png's other path: every PNG through libspng.
Result<Tensor> decode_png_with_libspng(std::span<const uint8_t> bytes, std::string_view path,
                                       ColorFormat color);

}  // namespace kiln::pipeline::detail
