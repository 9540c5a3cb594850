// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the image decoders (JPEG and PNG, as served by the pipeline backend) on arbitrary
// bytes must return a tensor or a Status, never crash; so must the JPEG marker walk that routes
// images to the GPU's decoder, and it must agree with the decoder on the size; a PNG the
// libdeflate path decodes must decode to the same pixels through libspng. The first byte picks
// the colour format and DCT scaling.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "pipeline/decoders/codecs.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/decoders/jpeg_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  kiln::pipeline::DecodeOptions options;
  options.color =
      data[0] % 2 ? kiln::pipeline::ColorFormat::kGray : kiln::pipeline::ColorFormat::kRGB;
  if (data[0] & 2) options.min_width = options.min_height = 8;
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  auto image = kiln::pipeline::decode_image(bytes, "fuzz.img", options);
  std::optional<kiln::pipeline::JpegHeader> header = kiln::pipeline::read_jpeg_header(bytes);
  if (header && header->hardware_decodable() && image.ok() && options.min_width == 0 &&
      (image->shape()[0] != header->height || image->shape()[1] != header->width)) {
    __builtin_trap();  // the GPU would decode another size than the CPU
  }
  if (std::optional<kiln::Tensor> fast =
          kiln::pipeline::detail::decode_simple_png(bytes, options.color)) {
    auto reference =
        kiln::pipeline::detail::decode_png_with_libspng(bytes, "fuzz.png", options.color);
    if (!reference.ok() || !reference->equals(*fast)) __builtin_trap();  // the two PNG paths differ
  }
  return 0;
}
