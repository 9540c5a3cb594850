// SPDX-License-Identifier: Apache-2.0
// Test images for the kernel tests: encoded and decoded through JPEG so pixels look like photos.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/tensor.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline::kernels::test {

// A w x h image of c (1 or 3) channels: a gradient and a checkerboard mixed, then JPEG-coded at
// quality 85 and decoded, so it carries real JPEG texture and ringing.
inline Tensor photo(int w, int h, int c) {
  std::vector<uint8_t> a = testing::make_pixels(w, h, c, testing::Pattern::kGradient);
  std::vector<uint8_t> b = testing::make_pixels(w, h, c, testing::Pattern::kCheckerboard);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((a[i] * 3 + b[i]) / 4);
  std::vector<uint8_t> jpeg = testing::encode_jpeg(a, w, h, c, 85);
  auto decoded = decode_image(jpeg, "photo.jpg", {c == 1 ? ColorFormat::kGray : ColorFormat::kRGB});
  KILN_CHECK(decoded.ok(), "test photo decode failed");
  return *decoded;
}

// The sizes every kernel is tested on: odd, gray, 1x1 and large.
struct Size {
  int w, h, c;
};
inline std::vector<Size> test_sizes() {
  return {{1, 1, 3}, {1, 1, 1}, {37, 23, 3}, {64, 48, 1}, {331, 257, 3}, {2048, 1536, 3}};
}

inline int max_abs_diff(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.shape() == b.shape() && a.dtype() == DType::kU8 && b.dtype() == DType::kU8);
  int worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::abs(int{a.data<uint8_t>()[i]} - int{b.data<uint8_t>()[i]}));
  }
  return worst;
}

}  // namespace kiln::pipeline::kernels::test
