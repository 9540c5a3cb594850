// SPDX-License-Identifier: Apache-2.0
// Crop and flip as row and pixel copies over raw bytes.
#include "pipeline/kernels/crop_flip.h"

#include <cstring>

namespace kiln::pipeline::kernels {

void crop_hwc(const TensorView& in, const TensorView& out, const Window& window) {
  KILN_CHECK(in.shape().rank() == 3 && out.shape().rank() == 3, "crop_hwc: HWC images only");
  KILN_CHECK(in.dtype() == out.dtype(), "crop_hwc: dtypes differ");
  const int64_t in_w = in.shape()[1], c = in.shape()[2];
  KILN_CHECK(window.y >= 0 && window.x >= 0 && window.height >= 0 && window.width >= 0 &&
                 window.y + window.height <= in.shape()[0] && window.x + window.width <= in_w,
             "crop_hwc: window outside the image");
  KILN_CHECK(out.shape() == Shape({window.height, window.width, c}), "crop_hwc: output shape");
  const size_t elem = dtype_size(in.dtype());
  const size_t row_bytes = static_cast<size_t>(window.width * c) * elem;
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t y = 0; y < window.height; ++y) {
    const uint8_t* s = src + static_cast<size_t>(((window.y + y) * in_w + window.x) * c) * elem;
    if (row_bytes > 0) std::memcpy(dst + static_cast<size_t>(y) * row_bytes, s, row_bytes);
  }
}

void flip_hwc(const TensorView& in, const TensorView& out, bool horizontal, bool vertical) {
  KILN_CHECK(in.shape().rank() == 3, "flip_hwc: HWC images only");
  KILN_CHECK(in.shape() == out.shape() && in.dtype() == out.dtype(), "flip_hwc: shapes differ");
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  const size_t pixel = static_cast<size_t>(c) * dtype_size(in.dtype());
  const size_t row_bytes = pixel * static_cast<size_t>(w);
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* s = src + static_cast<size_t>(vertical ? h - 1 - y : y) * row_bytes;
    uint8_t* d = dst + static_cast<size_t>(y) * row_bytes;
    if (!horizontal) {
      if (row_bytes > 0) std::memcpy(d, s, row_bytes);
      continue;
    }
    for (int64_t x = 0; x < w; ++x) {
      std::memcpy(d + static_cast<size_t>(x) * pixel, s + static_cast<size_t>(w - 1 - x) * pixel,
                  pixel);
    }
  }
}

}  // namespace kiln::pipeline::kernels
