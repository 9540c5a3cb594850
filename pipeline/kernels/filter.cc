// SPDX-License-Identifier: Apache-2.0
// Gaussian blur as a separable convolution (vertical pass to float, then horizontal) and noise.
#include "pipeline/kernels/filter.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kiln::pipeline::kernels {
namespace {

// Reflect-101 index into [0, n).
int64_t reflect(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

// splitmix64 draws uniform in [0, 1): kernels take a seed, not the operators' generator type.
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : state_(seed) {}
  double operator()() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

uint8_t saturate(float v) {
  return static_cast<uint8_t>(std::clamp(std::round(v), 0.0f, 255.0f));
}

}  // namespace

std::vector<float> gaussian_taps(double sigma, int64_t window) {
  KILN_CHECK(sigma > 0.0, "gaussian_taps: sigma must be positive");
  if (window <= 0) window = 2 * static_cast<int64_t>(std::ceil(3.0 * sigma)) + 1;
  KILN_CHECK(window % 2 == 1, "gaussian_taps: the window must be odd");
  const int64_t r = window / 2;
  std::vector<double> w(static_cast<size_t>(window));
  double total = 0.0;
  for (int64_t i = -r; i <= r; ++i) {
    w[i + r] = std::exp(-0.5 * static_cast<double>(i * i) / (sigma * sigma));
    total += w[i + r];
  }
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = static_cast<float>(w[i] / total);
  return out;
}

void convolve_separable_u8(const TensorView& in, const TensorView& out,
                           const std::vector<float>& taps_y, const std::vector<float>& taps_x) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "convolve: uint8 only");
  KILN_CHECK(in.shape().rank() == 3 && in.shape() == out.shape(), "convolve: shapes differ");
  KILN_CHECK(taps_y.size() % 2 == 1 && taps_x.size() % 2 == 1, "convolve: odd taps only");
  const int64_t h = in.shape()[0], w = in.shape()[1], c = in.shape()[2];
  const auto ry = static_cast<int64_t>(taps_y.size() / 2);
  const auto rx = static_cast<int64_t>(taps_x.size() / 2);
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  const int64_t row_len = w * c;
  // The vertically filtered row, with rx mirrored pixels on both sides.
  std::vector<float> row(static_cast<size_t>((w + 2 * rx) * c));
  std::vector<const uint8_t*> rows(taps_y.size());
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t k = -ry; k <= ry; ++k) rows[k + ry] = src + reflect(y + k, h) * row_len;
    float* center = row.data() + rx * c;
    for (int64_t i = 0; i < row_len; ++i) {
      float acc = 0.0f;
      for (size_t k = 0; k < taps_y.size(); ++k) acc += taps_y[k] * rows[k][i];
      center[i] = acc;
    }
    for (int64_t x = 1; x <= rx; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        center[(-x) * c + ch] = center[reflect(-x, w) * c + ch];
        center[(w - 1 + x) * c + ch] = center[reflect(w - 1 + x, w) * c + ch];
      }
    }
    uint8_t* d = dst + y * row_len;
    for (int64_t i = 0; i < row_len; ++i) {
      const float* p = center + i - rx * c;
      float acc = 0.0f;
      for (size_t k = 0; k < taps_x.size(); ++k) acc += taps_x[k] * p[static_cast<int64_t>(k) * c];
      d[i] = saturate(acc);
    }
  }
}

void gaussian_noise_u8(const TensorView& in, const TensorView& out, double mean, double stddev,
                       uint64_t seed) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "noise: uint8 only");
  KILN_CHECK(in.shape() == out.shape(), "noise: shapes differ");
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  const int64_t n = in.numel();
  Uniform uniform(seed);
  for (int64_t i = 0; i < n; i += 2) {
    // Box-Muller: two normal draws per pair of uniforms.
    const double u1 = 1.0 - uniform(), u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double z0 = radius * std::cos(2.0 * std::numbers::pi * u2);
    const double z1 = radius * std::sin(2.0 * std::numbers::pi * u2);
    dst[i] = saturate(static_cast<float>(src[i] + mean + stddev * z0));
    if (i + 1 < n) dst[i + 1] = saturate(static_cast<float>(src[i + 1] + mean + stddev * z1));
  }
}

void salt_and_pepper_u8(const TensorView& in, const TensorView& out, double prob,
                        double salt_vs_pepper, bool per_channel, uint64_t seed) {
  KILN_CHECK(in.dtype() == DType::kU8 && out.dtype() == DType::kU8, "noise: uint8 only");
  KILN_CHECK(in.shape().rank() == 3 && in.shape() == out.shape(), "noise: shapes differ");
  const int64_t c = in.shape()[2];
  const int64_t group = per_channel ? 1 : c;
  const int64_t n = in.numel() / group;
  const uint8_t* src = in.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  Uniform uniform(seed);
  for (int64_t i = 0; i < n; ++i) {
    const bool hit = uniform() < prob;
    const uint8_t value = uniform() < salt_vs_pepper ? 255 : 0;
    for (int64_t k = 0; k < group; ++k) dst[i * group + k] = hit ? value : src[i * group + k];
  }
}

}  // namespace kiln::pipeline::kernels
