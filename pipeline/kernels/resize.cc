// SPDX-License-Identifier: Apache-2.0
// Separable resize with precomputed per-axis taps: horizontal pass to float, vertical pass to u8.
#include "pipeline/kernels/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::pipeline::kernels {
namespace {

// For each output index along one axis: the first source index and the normalised weights.
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[i] weights for output i, packed at i * max_count
  int max_count = 0;
};

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
  double filter_scale = interp == Interp::kAntialiased ? std::max(scale, 1.0) : 1.0;
  double support = filter_scale;  // the triangle filter has support 1 before scaling
  taps.max_count = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.weights.assign(static_cast<size_t>(out_size) * taps.max_count, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    double center = (i + 0.5) * scale;
    int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    float* w = &taps.weights[static_cast<size_t>(i) * taps.max_count];
    double total = 0.0;
    int n = 0;
    for (int j = lo; j < hi && n < taps.max_count; ++j, ++n) {
      double x = std::abs((j - center + 0.5) / filter_scale);
      double weight = x < 1.0 ? 1.0 - x : 0.0;
      w[n] = static_cast<float>(weight);
      total += weight;
    }
    if (total <= 0.0) {  // cannot happen for positive sizes; keep the nearest pixel regardless
      lo = std::min(static_cast<int>(center), in_size - 1);
      n = 1;
      w[0] = 1.0f;
      total = 1.0;
    }
    for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / total);
    taps.first[i] = lo;
    taps.count[i] = n;
  }
  return taps;
}

}  // namespace

void resize_u8(const TensorView& in, const TensorView& out, Interp interp) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "resize_u8: uint8 only");
  KILN_CHECK(in.shape().rank() == 3 && out.shape().rank() == 3, "resize_u8: HWC images only");
  KILN_CHECK(in.shape()[2] == out.shape()[2], "resize_u8: channel counts differ");
  const int in_h = static_cast<int>(in.shape()[0]), in_w = static_cast<int>(in.shape()[1]);
  const int out_h = static_cast<int>(out.shape()[0]), out_w = static_cast<int>(out.shape()[1]);
  const int c = static_cast<int>(in.shape()[2]);
  KILN_CHECK(in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0, "resize_u8: empty image");
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();

  Taps tx = make_taps(in_w, out_w, interp);
  Taps ty = make_taps(in_h, out_h, interp);

  // Horizontal pass over only the source rows the vertical taps touch (all of them in practice).
  std::vector<float> rows(static_cast<size_t>(in_h) * out_w * c);
  for (int y = 0; y < in_h; ++y) {
    const uint8_t* s = src + static_cast<size_t>(y) * in_w * c;
    float* r = &rows[static_cast<size_t>(y) * out_w * c];
    for (int x = 0; x < out_w; ++x) {
      const float* w = &tx.weights[static_cast<size_t>(x) * tx.max_count];
      const uint8_t* p = s + static_cast<size_t>(tx.first[x]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float acc = 0.0f;
        for (int k = 0; k < tx.count[x]; ++k) acc += w[k] * p[k * c + ch];
        r[x * c + ch] = acc;
      }
    }
  }
  const size_t row_len = static_cast<size_t>(out_w) * c;
  for (int y = 0; y < out_h; ++y) {
    const float* w = &ty.weights[static_cast<size_t>(y) * ty.max_count];
    uint8_t* d = dst + y * row_len;
    for (size_t i = 0; i < row_len; ++i) {
      float acc = 0.0f;
      for (int k = 0; k < ty.count[y]; ++k) {
        acc += w[k] * rows[static_cast<size_t>(ty.first[y] + k) * row_len + i];
      }
      d[i] = static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L));
    }
  }
}

}  // namespace kiln::pipeline::kernels
