// SPDX-License-Identifier: Apache-2.0
// Affine warps by inverse mapping, rotation matrices, padding and casts.
#include "pipeline/kernels/warp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace kiln::pipeline::kernels {

void warp_affine_u8(const TensorView& in, const TensorView& out, const Affine& m, bool linear,
                    uint8_t fill) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "warp: uint8 only");
  KILN_CHECK(in.shape().rank() == 3 && out.shape().rank() == 3, "warp: HWC images only");
  KILN_CHECK(in.shape()[2] == out.shape()[2], "warp: channel counts differ");
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  const int64_t out_h = out.shape()[0], out_w = out.shape()[1];
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  auto pixel = [&](int64_t y, int64_t x, int64_t ch) -> float {
    if (y < 0 || y >= h || x < 0 || x >= w) return fill;
    return src[(y * w + x) * c + ch];
  };
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      const double ox = static_cast<double>(x) + 0.5, oy = static_cast<double>(y) + 0.5;
      const double sx = m[0] * ox + m[1] * oy + m[2], sy = m[3] * ox + m[4] * oy + m[5];
      uint8_t* d = dst + (y * out_w + x) * c;
      if (!linear) {
        const auto ix = static_cast<int64_t>(std::floor(sx));
        const auto iy = static_cast<int64_t>(std::floor(sy));
        for (int64_t ch = 0; ch < c; ++ch) d[ch] = static_cast<uint8_t>(pixel(iy, ix, ch));
        continue;
      }
      const double fx = sx - 0.5, fy = sy - 0.5;
      const auto x0 = static_cast<int64_t>(std::floor(fx));
      const auto y0 = static_cast<int64_t>(std::floor(fy));
      const auto ax = static_cast<float>(fx - static_cast<double>(x0));
      const auto ay = static_cast<float>(fy - static_cast<double>(y0));
      for (int64_t ch = 0; ch < c; ++ch) {
        const float top = pixel(y0, x0, ch) * (1 - ax) + pixel(y0, x0 + 1, ch) * ax;
        const float bottom = pixel(y0 + 1, x0, ch) * (1 - ax) + pixel(y0 + 1, x0 + 1, ch) * ax;
        d[ch] = static_cast<uint8_t>(
            std::clamp(std::round(top * (1 - ay) + bottom * ay), 0.0f, 255.0f));
      }
    }
  }
}

Affine rotation(double degrees, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w) {
  const double a = degrees * std::numbers::pi / 180.0;
  const double c = std::cos(a), s = std::sin(a);
  // With y down, an on-screen counter-clockwise turn maps input offset p to
  // [c s; -s c] p; the output -> input map is its inverse [c -s; s c].
  const double ocx = static_cast<double>(out_w) / 2, ocy = static_cast<double>(out_h) / 2;
  const double icx = static_cast<double>(in_w) / 2, icy = static_cast<double>(in_h) / 2;
  return {c, -s, icx - c * ocx + s * ocy, s, c, icy - s * ocx - c * ocy};
}

std::array<int64_t, 2> rotated_bounds(double degrees, int64_t h, int64_t w) {
  const double a = degrees * std::numbers::pi / 180.0;
  const double c = std::abs(std::cos(a)), s = std::abs(std::sin(a));
  // Round away tiny float error (e.g. 90 degrees) before the ceiling.
  auto size = [](double v) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(v - 1e-6)));
  };
  return {size(static_cast<double>(h) * c + static_cast<double>(w) * s),
          size(static_cast<double>(w) * c + static_cast<double>(h) * s)};
}

void pad_hwc(const TensorView& in, const TensorView& out, double fill) {
  KILN_CHECK(in.shape().rank() == 3 && out.shape().rank() == 3, "pad: HWC images only");
  KILN_CHECK(in.dtype() == out.dtype(), "pad: dtypes differ");
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  const int64_t out_h = out.shape()[0], out_w = out.shape()[1];
  KILN_CHECK(out.shape()[2] == c && out_h >= h && out_w >= w, "pad: output smaller than input");
  auto run = [&]<class T>(T value) {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    std::fill(dst, dst + out.numel(), value);
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(dst + y * out_w * c, src + y * w * c, static_cast<size_t>(w * c) * sizeof(T));
    }
  };
  if (in.dtype() == DType::kU8) {
    run(static_cast<uint8_t>(std::clamp(std::round(fill), 0.0, 255.0)));
  } else {
    KILN_CHECK(in.dtype() == DType::kF32, "pad: uint8 or float32 only");
    run(static_cast<float>(fill));
  }
}

namespace {

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_floating_point_v<To> || !std::is_floating_point_v<From>) {
    if constexpr (std::is_same_v<To, uint8_t> && !std::is_same_v<From, uint8_t>) {
      return static_cast<To>(std::clamp<int64_t>(static_cast<int64_t>(v), 0, 255));
    } else {
      return static_cast<To>(v);
    }
  } else {
    if (std::isnan(v)) return 0;
    const double r = std::round(static_cast<double>(v));
    return static_cast<To>(std::clamp(r, static_cast<double>(std::numeric_limits<To>::lowest()),
                                      static_cast<double>(std::numeric_limits<To>::max())));
  }
}

template <class From>
void cast_from(const TensorView& in, const TensorView& out) {
  const From* src = in.data<From>();
  const int64_t n = in.numel();
  auto run = [&]<class To>(To* dst) {
    for (int64_t i = 0; i < n; ++i) dst[i] = convert<To>(src[i]);
  };
  switch (out.dtype()) {
    case DType::kU8: run(out.data<uint8_t>()); break;
    case DType::kI32: run(out.data<int32_t>()); break;
    case DType::kF32: run(out.data<float>()); break;
    default: KILN_CHECK(false, "cast: output must be uint8, int32 or float32");
  }
}

}  // namespace

void cast(const TensorView& in, const TensorView& out) {
  KILN_CHECK(in.shape() == out.shape(), "cast: shapes differ");
  switch (in.dtype()) {
    case DType::kU8: cast_from<uint8_t>(in, out); break;
    case DType::kI32: cast_from<int32_t>(in, out); break;
    case DType::kF32: cast_from<float>(in, out); break;
    default: KILN_CHECK(false, "cast: input must be uint8, int32 or float32");
  }
}

}  // namespace kiln::pipeline::kernels
