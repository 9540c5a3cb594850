// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the image decoders (JPEG and PNG, as served by the pipeline backend) on arbitrary
// bytes must return a tensor or a Status, never crash. The first byte picks the colour format and
// DCT scaling.
#include <cstddef>
#include <cstdint>
#include <span>

#include "pipeline/decoders/image_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  kiln::pipeline::DecodeOptions options;
  options.color =
      data[0] % 2 ? kiln::pipeline::ColorFormat::kGray : kiln::pipeline::ColorFormat::kRGB;
  if (data[0] & 2) options.min_width = options.min_height = 8;
  auto image = kiln::pipeline::decode_image(std::span<const uint8_t>(data + 1, size - 1),
                                            "fuzz.img", options);
  (void)image;
  return 0;
}
