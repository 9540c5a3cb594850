// SPDX-License-Identifier: Apache-2.0
// Separable resize with precomputed per-axis taps: a SIMD vertical pass to float rows, then a
// horizontal pass to uint8 (SIMD per RGB pixel). Highway compiles the SIMD passes for every x86
// target and picks the best one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "pipeline/kernels/resize.cc"
#include "pipeline/kernels/resize.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace kiln::pipeline::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// dst[i] = sum_k weights[k] * rows[k][i] for i < n, rows of uint8 pixels.
void VerticalPass(const uint8_t* const* rows, const float* weights, int taps, size_t n,
                  float* dst) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto acc = hn::Zero(df);
    for (int k = 0; k < taps; ++k) {
      auto v = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(du8, rows[k] + i)));
      acc = hn::MulAdd(hn::Set(df, weights[k]), v, acc);
    }
    hn::StoreU(acc, df, dst + i);
  }
  for (; i < n; ++i) {
    float acc = 0.0f;
    for (int k = 0; k < taps; ++k) acc += weights[k] * static_cast<float>(rows[k][i]);
    dst[i] = acc;
  }
}

// One RGB output row from a float row: a 4-lane vector per output pixel holds R, G, B and a
// spare lane, so each tap is one multiply-add. `src` has one readable float past its last pixel;
// `first`, `count` and `weights` (max_count per pixel) are the horizontal taps.
void HorizontalPassRgb(const float* src, const int* first, const int* count, const float* weights,
                       int max_count, int out_w, uint8_t* dst) {
#if HWY_TARGET == HWY_SCALAR
  for (int x = 0; x < out_w; ++x) {
    const float* w = weights + static_cast<size_t>(x) * max_count;
    const float* p = src + static_cast<size_t>(first[x]) * 3;
    for (int ch = 0; ch < 3; ++ch) {
      float acc = 0.0f;
      for (int k = 0; k < count[x]; ++k) acc += w[k] * p[3 * k + ch];
      dst[3 * x + ch] = static_cast<uint8_t>(std::clamp(acc + 0.5f, 0.0f, 255.0f));
    }
  }
#else
  const hn::FixedTag<float, 4> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const auto half = hn::Set(df, 0.5f), lo = hn::Zero(df), hi = hn::Set(df, 255.0f);
  HWY_ALIGN uint8_t last[4];
  for (int x = 0; x < out_w; ++x) {
    const float* w = weights + static_cast<size_t>(x) * max_count;
    const float* p = src + static_cast<size_t>(first[x]) * 3;
    auto acc = hn::Zero(df);
    for (int k = 0; k < count[x]; ++k)
      acc = hn::MulAdd(hn::Set(df, w[k]), hn::LoadU(df, p + 3 * k), acc);
    const auto v =
        hn::DemoteTo(du8, hn::ConvertTo(di, hn::Min(hn::Max(hn::Add(acc, half), lo), hi)));
    // Writing 4 bytes spills into the next pixel, which is written afterwards; not past the row.
    if (x + 1 < out_w) {
      hn::StoreU(v, du8, dst + 3 * x);
    } else {
      hn::Store(v, du8, last);
      dst[3 * x] = last[0];
      dst[3 * x + 1] = last[1];
      dst[3 * x + 2] = last[2];
    }
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::pipeline::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::pipeline::kernels {

HWY_EXPORT(VerticalPass);
HWY_EXPORT(HorizontalPassRgb);

namespace {

// For each output index along one axis: the first source index and the normalised weights.
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[i] weights for output i, packed at i * max_count
  int max_count = 0;
};

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5, as PIL's BICUBIC.
double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

Taps make_taps(int in_size, int out_size, Interp interp) {
  Taps taps;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  double scale = static_cast<double>(in_size) / out_size;
  if (interp == Interp::kNearest) {
    taps.max_count = 1;
    taps.weights.assign(out_size, 1.0f);
    for (int i = 0; i < out_size; ++i) {
      taps.first[i] = std::min(static_cast<int>(std::floor((i + 0.5) * scale)), in_size - 1);
      taps.count[i] = 1;
    }
    return taps;
  }
  const bool cubic = interp == Interp::kCubic || interp == Interp::kCubicAntialiased;
  const bool antialias = interp == Interp::kAntialiased || interp == Interp::kCubicAntialiased;
  double filter_scale = antialias ? std::max(scale, 1.0) : 1.0;
  double support = (cubic ? 2.0 : 1.0) * filter_scale;
  taps.max_count = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.weights.assign(static_cast<size_t>(out_size) * taps.max_count, 0.0f);
  std::vector<double> w(static_cast<size_t>(taps.max_count));
  for (int i = 0; i < out_size; ++i) {
    double center = (i + 0.5) * scale;
    int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    double total = 0.0;
    int n = 0;
    for (int j = lo; j < hi && n < taps.max_count; ++j, ++n) {
      double x = (j - center + 0.5) / filter_scale;
      w[n] = cubic ? keys_cubic(x) : triangle(x);
      total += w[n];
    }
    if (total == 0.0) {  // cannot happen for positive sizes; keep the nearest pixel regardless
      lo = std::min(static_cast<int>(center), in_size - 1);
      n = 1;
      w[0] = 1.0;
      total = 1.0;
    }
    // Trim zero weights at both ends so the passes do no useless work.
    int begin = 0, end = n;
    while (begin < end - 1 && w[begin] == 0.0) ++begin;
    while (end > begin + 1 && w[end - 1] == 0.0) --end;
    float* out = &taps.weights[static_cast<size_t>(i) * taps.max_count];
    for (int k = begin; k < end; ++k) out[k - begin] = static_cast<float>(w[k] / total);
    taps.first[i] = lo + begin;
    taps.count[i] = end - begin;
  }
  return taps;
}

uint8_t to_u8(float v) {
  return static_cast<uint8_t>(std::clamp(v + 0.5f, 0.0f, 255.0f));
}

// One output row from a float row of pixels of C channels (any C but 3, which has a SIMD pass).
template <int C>
void horizontal_pass(const float* src, const Taps& tx, int out_w, int channels, uint8_t* dst) {
  const int c = C > 0 ? C : channels;
  for (int x = 0; x < out_w; ++x) {
    const float* w = &tx.weights[static_cast<size_t>(x) * tx.max_count];
    const float* p = src + static_cast<size_t>(tx.first[x]) * c;
    const int count = tx.count[x];
    for (int ch = 0; ch < c; ++ch) {
      float acc = 0.0f;
      for (int k = 0; k < count; ++k) acc += w[k] * p[k * c + ch];
      dst[x * c + ch] = to_u8(acc);
    }
  }
}

}  // namespace

void resize_window_u8(const TensorView& in, const Window& window, const TensorView& out,
                      Interp interp) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "resize_u8: uint8 only");
  KILN_CHECK(in.shape().rank() == 3 && out.shape().rank() == 3, "resize_u8: HWC images only");
  KILN_CHECK(in.shape()[2] == out.shape()[2], "resize_u8: channel counts differ");
  KILN_CHECK(window.x >= 0 && window.y >= 0 && window.width > 0 && window.height > 0 &&
                 window.x + window.width <= in.shape()[1] &&
                 window.y + window.height <= in.shape()[0],
             "resize_u8: window outside the image");
  const int in_w = static_cast<int>(in.shape()[1]);
  const int win_h = static_cast<int>(window.height), win_w = static_cast<int>(window.width);
  const int out_h = static_cast<int>(out.shape()[0]), out_w = static_cast<int>(out.shape()[1]);
  const int c = static_cast<int>(in.shape()[2]);
  KILN_CHECK(out_h > 0 && out_w > 0, "resize_u8: empty output");
  const uint8_t* src = in.data<uint8_t>() + (window.y * in_w + window.x) * c;
  uint8_t* dst = out.data<uint8_t>();
  const size_t src_stride = static_cast<size_t>(in_w) * c;
  const size_t row_len = static_cast<size_t>(win_w) * c;

  Taps tx = make_taps(win_w, out_w, interp);
  Taps ty = make_taps(win_h, out_h, interp);

  // Vertical first (contiguous rows, SIMD), so the horizontal pass runs on out_h rows only.
  thread_local std::vector<float> row;
  row.resize(row_len + 1);  // one spare float for the 4-lane RGB loads
  std::vector<const uint8_t*> rows(static_cast<size_t>(ty.max_count));
  for (int y = 0; y < out_h; ++y) {
    const int count = ty.count[y];
    for (int k = 0; k < count; ++k) {
      rows[k] = src + static_cast<size_t>(ty.first[y] + k) * src_stride;
    }
    HWY_DYNAMIC_DISPATCH(VerticalPass)
    (rows.data(), &ty.weights[static_cast<size_t>(y) * ty.max_count], count, row_len, row.data());
    uint8_t* d = dst + static_cast<size_t>(y) * out_w * c;
    switch (c) {
      case 1: horizontal_pass<1>(row.data(), tx, out_w, c, d); break;
      case 3:
        HWY_DYNAMIC_DISPATCH(HorizontalPassRgb)
        (row.data(), tx.first.data(), tx.count.data(), tx.weights.data(), tx.max_count, out_w, d);
        break;
      default: horizontal_pass<0>(row.data(), tx, out_w, c, d); break;
    }
  }
}

void resize_u8(const TensorView& in, const TensorView& out, Interp interp) {
  KILN_CHECK(in.shape().rank() == 3, "resize_u8: HWC images only");
  resize_window_u8(in, Window{0, 0, in.shape()[0], in.shape()[1]}, out, interp);
}

}  // namespace kiln::pipeline::kernels
#endif  // HWY_ONCE
