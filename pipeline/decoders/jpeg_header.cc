// SPDX-License-Identifier: Apache-2.0
// JPEG marker walk up to the frame header.
#include "pipeline/decoders/jpeg_header.h"

namespace kiln::pipeline {

bool JpegHeader::hardware_decodable() const {
  if (!huffman_sequential || width <= 0 || height <= 0) return false;
  if (components == 1) return true;
  if (components != 3) return false;
  // Chroma at 1x1; luma at 1x1 (4:4:4), 2x1 (4:2:2), 2x2 (4:2:0) or 1x2 (4:4:0).
  if (h_sampling[1] != 1 || v_sampling[1] != 1 || h_sampling[2] != 1 || v_sampling[2] != 1) {
    return false;
  }
  return (h_sampling[0] == 1 || h_sampling[0] == 2) && (v_sampling[0] == 1 || v_sampling[0] == 2);
}

std::optional<JpegHeader> read_jpeg_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) return std::nullopt;
  JpegHeader header;
  size_t at = 2;
  while (at + 4 <= bytes.size()) {
    if (bytes[at] != 0xFF) return std::nullopt;
    const uint8_t marker = bytes[at + 1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      at += 2;  // markers without a length
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) return std::nullopt;  // EOI or scan before a frame
    const size_t length = (size_t{bytes[at + 2]} << 8) | bytes[at + 3];
    if (length < 2 || at + 2 + length > bytes.size()) return std::nullopt;
    const uint8_t* p = bytes.data() + at + 4;
    const size_t n = length - 2;
    if (marker == 0xEE && n >= 12 && p[0] == 'A' && p[1] == 'd' && p[2] == 'o' && p[3] == 'b' &&
        p[4] == 'e') {
      header.adobe_transform_cmyk = true;
    }
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (n < 6) return std::nullopt;
      header.height = (p[1] << 8) | p[2];
      header.width = (p[3] << 8) | p[4];
      header.components = p[5];
      if (n < 6 + size_t{3} * header.components) return std::nullopt;
      for (int c = 0; c < header.components && c < 3; ++c) {
        header.h_sampling[c] = p[6 + 3 * c + 1] >> 4;
        header.v_sampling[c] = p[6 + 3 * c + 1] & 0x0F;
      }
      header.huffman_sequential = marker == 0xC0 || marker == 0xC1;
      header.progressive = marker == 0xC2;
      if (header.components != 4) header.adobe_transform_cmyk = false;
      return header;
    }
    at += 2 + length;
  }
  return std::nullopt;
}

}  // namespace kiln::pipeline
