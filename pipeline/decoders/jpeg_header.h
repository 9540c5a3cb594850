// SPDX-License-Identifier: Apache-2.0
// What a JPEG's markers say about it (size, components, coding, sampling), read without decoding.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace kiln::pipeline {

struct JpegHeader {
  int width = 0;
  int height = 0;
  int components = 0;
  bool progressive = false;
  bool huffman_sequential = false;  // baseline or extended sequential, Huffman coded
  // Sampling factors of the first three components (1 each for gray).
  int h_sampling[3] = {1, 1, 1};
  int v_sampling[3] = {1, 1, 1};
  bool adobe_transform_cmyk = false;  // an APP14 "Adobe" marker with 4 components

  // A baseline/extended sequential gray or YCbCr image whose chroma is 4:4:4, 4:2:2, 4:2:0 or
  // 4:4:0: what the GPU's hardware JPEG decoder takes.
  bool hardware_decodable() const;
};

// The first frame header (SOF) of `bytes`, walking the markers from SOI; nullopt when the bytes
// are not a JPEG or end before a frame header.
std::optional<JpegHeader> read_jpeg_header(std::span<const uint8_t> bytes);

}  // namespace kiln::pipeline
