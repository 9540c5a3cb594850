// SPDX-License-Identifier: Apache-2.0
// The fused crop-mirror-normalize kernel: one read and one write per element.
#include "pipeline/kernels/normalize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::pipeline::kernels {
namespace {

template <class Out>
Out convert(float v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else {
    return static_cast<uint8_t>(std::clamp(std::round(v), 0.0f, 255.0f));
  }
}

template <class Out>
void run(const TensorView& in, const TensorView& out, const Window& window, bool mirror,
         const std::vector<float>& mean, const std::vector<float>& scale, Layout layout) {
  const int64_t in_w = in.shape()[1], c = in.shape()[2];
  const int64_t h = window.height, w = window.width;
  const uint8_t* src = in.data<uint8_t>();
  Out* dst = out.data<Out>();
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = src + ((window.y + y) * in_w + window.x) * c;
    for (int64_t x = 0; x < w; ++x) {
      const uint8_t* p = row + (mirror ? w - 1 - x : x) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        Out v = convert<Out>((static_cast<float>(p[ch]) - mean[ch]) * scale[ch]);
        if (layout == Layout::kHWC) {
          dst[(y * w + x) * c + ch] = v;
        } else {
          dst[(ch * h + y) * w + x] = v;
        }
      }
    }
  }
}

}  // namespace

void crop_mirror_normalize_u8(const TensorView& in, const TensorView& out, const Window& window,
                              bool mirror, std::span<const float> mean,
                              std::span<const float> stddev, Layout layout) {
  KILN_CHECK(in.dtype() == DType::kU8 && in.shape().rank() == 3, "cmn: input must be HWC uint8");
  const int64_t c = in.shape()[2];
  KILN_CHECK(window.y >= 0 && window.x >= 0 && window.y + window.height <= in.shape()[0] &&
                 window.x + window.width <= in.shape()[1],
             "cmn: window outside the image");
  Shape expected = layout == Layout::kHWC ? Shape{window.height, window.width, c}
                                          : Shape{c, window.height, window.width};
  KILN_CHECK(out.shape() == expected, "cmn: output shape");
  auto per_channel = [&](std::span<const float> values, bool invert) {
    KILN_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == c,
               "cmn: mean/std must have 1 or C values");
    std::vector<float> v(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) {
      float x = values[values.size() == 1 ? 0 : ch];
      KILN_CHECK(!invert || x != 0.0f, "cmn: zero std");
      v[ch] = invert ? 1.0f / x : x;
    }
    return v;
  };
  std::vector<float> m = per_channel(mean, false);
  std::vector<float> s = per_channel(stddev, true);
  if (out.dtype() == DType::kF32) {
    run<float>(in, out, window, mirror, m, s, layout);
  } else {
    KILN_CHECK(out.dtype() == DType::kU8, "cmn: output must be float32 or uint8");
    run<uint8_t>(in, out, window, mirror, m, s, layout);
  }
}

}  // namespace kiln::pipeline::kernels
