// SPDX-License-Identifier: Apache-2.0
// The fused crop-mirror-normalize kernel: one read and one write per element; RGB to planar float
// runs a SIMD loop that Highway compiles for every x86 target and picks at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "pipeline/kernels/normalize.cc"
#include "pipeline/kernels/normalize.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace kiln::pipeline::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// The common case, RGB to planar float32 (or float16, rounded to nearest even): SIMD over whole
// vectors of pixels, one deinterleaving load per vector; the ends of a row go through the scalar
// code.
template <class Out>
void RgbToChw(const TensorView& in, const TensorView& out, const Window& window, bool mirror,
              const std::vector<float>& mean, const std::vector<float>& scale) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t in_w = in.shape()[1];
  const int64_t h = window.height, w = window.width;
  const uint8_t* src = in.data<uint8_t>();
  Out* dst = static_cast<Out*>(out.raw_data());
  const size_t plane = static_cast<size_t>(h * w);
  auto store = [&](hn::Vec<decltype(df)> v, Out* p) {
    if constexpr (std::is_same_v<Out, float>) {
      hn::StoreU(v, df, p);
    } else {
      const hn::Rebind<hwy::float16_t, decltype(df)> dh;
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
    }
  };
  auto scalar = [](float v) {
    if constexpr (std::is_same_v<Out, float>) {
      return v;
    } else {
      return Half(v);
    }
  };
  const auto m0 = hn::Set(df, mean[0]), m1 = hn::Set(df, mean[1]), m2 = hn::Set(df, mean[2]);
  const auto s0 = hn::Set(df, scale[0]), s1 = hn::Set(df, scale[1]), s2 = hn::Set(df, scale[2]);
  auto load = [&](const uint8_t* p, auto* r, auto* g, auto* b) {
    hn::Vec<decltype(du8)> v0, v1, v2;
    hn::LoadInterleaved3(du8, p, v0, v1, v2);
    *r = hn::ConvertTo(df, hn::PromoteTo(di, v0));
    *g = hn::ConvertTo(df, hn::PromoteTo(di, v1));
    *b = hn::ConvertTo(df, hn::PromoteTo(di, v2));
  };
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = src + ((window.y + y) * in_w + window.x) * 3;
    Out* d0 = dst + static_cast<size_t>(y * w);
    Out* d1 = d0 + plane;
    Out* d2 = d1 + plane;
    int64_t x = 0;
    for (; x + lanes <= w; x += lanes) {
      hn::Vec<decltype(df)> r, g, b;
      if (mirror) {
        load(row + (w - x - lanes) * 3, &r, &g, &b);
        r = hn::Reverse(df, r);
        g = hn::Reverse(df, g);
        b = hn::Reverse(df, b);
      } else {
        load(row + x * 3, &r, &g, &b);
      }
      store(hn::Mul(hn::Sub(r, m0), s0), d0 + x);
      store(hn::Mul(hn::Sub(g, m1), s1), d1 + x);
      store(hn::Mul(hn::Sub(b, m2), s2), d2 + x);
    }
    for (; x < w; ++x) {
      const uint8_t* p = row + (mirror ? w - 1 - x : x) * 3;
      d0[x] = scalar((static_cast<float>(p[0]) - mean[0]) * scale[0]);
      d1[x] = scalar((static_cast<float>(p[1]) - mean[1]) * scale[1]);
      d2[x] = scalar((static_cast<float>(p[2]) - mean[2]) * scale[2]);
    }
  }
}

void RgbToChwF32(const TensorView& in, const TensorView& out, const Window& window, bool mirror,
                 const std::vector<float>& mean, const std::vector<float>& scale) {
  RgbToChw<float>(in, out, window, mirror, mean, scale);
}

void RgbToChwF16(const TensorView& in, const TensorView& out, const Window& window, bool mirror,
                 const std::vector<float>& mean, const std::vector<float>& scale) {
  RgbToChw<Half>(in, out, window, mirror, mean, scale);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::pipeline::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::pipeline::kernels {

HWY_EXPORT(RgbToChwF32);
HWY_EXPORT(RgbToChwF16);

namespace {

template <class Out>
Out convert(float v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else if constexpr (std::is_same_v<Out, Half>) {
    return Half(v);
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
  if (out.dtype() == DType::kF32 && c == 3 && layout == Layout::kCHW) {
    HWY_DYNAMIC_DISPATCH(RgbToChwF32)(in, out, window, mirror, m, s);
  } else if (out.dtype() == DType::kF16 && c == 3 && layout == Layout::kCHW) {
    HWY_DYNAMIC_DISPATCH(RgbToChwF16)(in, out, window, mirror, m, s);
  } else if (out.dtype() == DType::kF32) {
    run<float>(in, out, window, mirror, m, s, layout);
  } else if (out.dtype() == DType::kF16) {
    run<Half>(in, out, window, mirror, m, s, layout);
  } else {
    KILN_CHECK(out.dtype() == DType::kU8, "cmn: output must be float32, float16 or uint8");
    run<uint8_t>(in, out, window, mirror, m, s, layout);
  }
}

}  // namespace kiln::pipeline::kernels
#endif  // HWY_ONCE
