// SPDX-License-Identifier: Apache-2.0
// A network's first convolution as kiln's own AVX-512 kernel: it reads the NCHW image as it comes
// (oneDNN's brgconv wants NHWC, a reorder of the whole image first), applies the activation
// (Relu, Clip, SiLU) in registers, writes the layout the next step reads (no reorder after), and
// pools bands of its output rows while they are in cache (oneDNN writes the whole convolution
// output, and its MaxPool reads it back).
#include "compiler/targets/cpu/kernels/stem.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "compiler/targets/cpu/kernels/sigmoid_avx512.h"
#include "compiler/targets/cpu/kernels/silu.h"
#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_STEM_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

constexpr int kTilePixels = 6;    // 6 pixels by 4 blocks of 16 channels: 24 accumulators
constexpr int64_t kBandRows = 8;  // pooled rows per band: the convolution rows they read in cache

#if KILN_STEM_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in kernels/silu.cc
#pragma GCC diagnostic ignored "-Wuninitialized"        // the same, once silu_ps is inlined

// SiLU in place over `pixels` x `blocks` vectors of 16 floats (strides as stem_tile's).
__attribute__((target("avx512f"), noinline)) void silu_tile(float* out, int pixels, int blocks,
                                                            int64_t pixel_stride,
                                                            int64_t block_stride) {
  for (int p = 0; p < pixels; ++p) {
    for (int j = 0; j < blocks; ++j) {
      float* at = out + p * pixel_stride + j * block_stride;
      _mm512_storeu_ps(at, silu_ps(_mm512_loadu_ps(at)));
    }
  }
}

// One tap of the window: acc[p][j] += w[j] * x[ix0 + p stride] for the tile's pixels and output
// blocks (zero outside the image when kEdge).
template <int kBlocks, int kPixels, bool kEdge>
__attribute__((target("avx512f"), always_inline)) inline void stem_tap(
    __m512 (&acc)[kPixels][kBlocks], const float* wk, const float* in_row, int64_t ix0,
    int64_t stride, int64_t in_w) {
  __m512 wv[kBlocks];
#pragma GCC unroll 4
  for (int j = 0; j < kBlocks; ++j) wv[j] = _mm512_loadu_ps(wk + 16 * j);
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) {
    const int64_t ix = ix0 + p * stride;
    __m512 xb;
    if constexpr (kEdge) {
      xb = _mm512_set1_ps(ix >= 0 && ix < in_w ? in_row[ix] : 0.0f);
    } else {
      // A broadcast from memory: one load. From _mm512_set1_ps, GCC kept the pixels that a
      // stride-2 window's next tap reads again in registers (spilling some to the stack) and
      // broadcast them on port 5, which the FMAs need too.
      __asm__("vbroadcastss %1, %0" : "=v"(xb) : "m"(in_row[ix]));
    }
#pragma GCC unroll 4
    for (int j = 0; j < kBlocks; ++j) acc[p][j] = _mm512_fmadd_ps(wv[j], xb, acc[p][j]);
  }
}

// Output pixels [x0, x0 + kPixels) of convolution row `oy`, output channels [64 g, 64 g + 16
// blocks), into `row` (a pixel every `pixel_stride` floats, a block of 16 channels every
// `block_stride`). kEdge: some taps of these pixels fall outside the image (they read zero).
// kKernel, kStride: the window's size and stride where they are known here (loops unrolled,
// addresses constant offsets), 0 where they are not.
template <int kBlocks, int kPixels, bool kEdge, int kKernel = 0, int kStride = 0>
__attribute__((target("avx512f"))) void stem_tile(const StemShape& s, const float* x,
                                                  const float* w, const float* bias,
                                                  const StemActivation& act, int64_t oy, int64_t x0,
                                                  float* out, int64_t pixel_stride,
                                                  int64_t block_stride) {
  __m512 acc[kPixels][kBlocks];
#pragma GCC unroll 4
  for (int j = 0; j < kBlocks; ++j) {
    const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + 16 * j) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) acc[p][j] = b;
  }
  const int64_t k = kKernel > 0 ? kKernel : s.kernel;
  const int64_t stride = kStride > 0 ? kStride : s.stride;
  for (int64_t c = 0; c < s.in; ++c) {
#pragma GCC unroll 7
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t iy = oy * stride - s.pad + ky;
      if (iy < 0 || iy >= s.in_h) continue;
      const float* in_row = x + (c * s.in_h + iy) * s.in_w;
      const float* wk = w + ((c * k + ky) * k) * 64;
      const int64_t ix0 = x0 * stride - s.pad;
      // A 7-wide window's taps in a loop: unrolled, GCC broadcast several pixels ahead and
      // spilled accumulators (ResNet's stem took 1.1x the time); 3-wide ones unrolled (0.9x).
      if constexpr (kKernel == 7) {
#pragma GCC unroll 1
        for (int64_t kx = 0; kx < k; ++kx) {
          stem_tap<kBlocks, kPixels, kEdge>(acc, wk + kx * 64, in_row, ix0 + kx, stride, s.in_w);
        }
      } else {
#pragma GCC unroll 7
        for (int64_t kx = 0; kx < k; ++kx) {
          stem_tap<kBlocks, kPixels, kEdge>(acc, wk + kx * 64, in_row, ix0 + kx, stride, s.in_w);
        }
      }
    }
  }
  using Kind = StemActivation::Kind;
  const __m512 lo = _mm512_set1_ps(act.kind == Kind::kRelu ? 0.0f : act.lo);
  const __m512 hi = _mm512_set1_ps(act.hi);
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) {
#pragma GCC unroll 4
    for (int j = 0; j < kBlocks; ++j) {
      __m512 v = acc[p][j];
      if (act.kind == Kind::kRelu) v = _mm512_max_ps(v, lo);
      if (act.kind == Kind::kClip) v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      _mm512_storeu_ps(out + p * pixel_stride + j * block_stride, v);
    }
  }
  // SiLU's polynomial and its constants stay out of the tile's registers: it reads the stored
  // tile back from L1.
  if (act.kind == Kind::kSilu) silu_tile(out, kPixels, kBlocks, pixel_stride, block_stride);
}

using TileFn = void (*)(const StemShape&, const float*, const float*, const float*,
                        const StemActivation&, int64_t, int64_t, float*, int64_t, int64_t);

template <int kBlocks, bool kEdge, size_t... kPixels>
constexpr std::array<TileFn, sizeof...(kPixels)> tile_row(std::index_sequence<kPixels...>) {
  return {stem_tile<kBlocks, static_cast<int>(kPixels) + 1, kEdge>...};
}

template <bool kEdge>
constexpr std::array<std::array<TileFn, kTilePixels>, 4> tile_table() {
  constexpr auto pixels = std::make_index_sequence<kTilePixels>();
  return {tile_row<1, kEdge>(pixels), tile_row<2, kEdge>(pixels), tile_row<3, kEdge>(pixels),
          tile_row<4, kEdge>(pixels)};
}

// kTiles[edge][blocks - 1][pixels - 1].
constexpr std::array<std::array<std::array<TileFn, kTilePixels>, 4>, 2> kTiles = {
    tile_table<false>(), tile_table<true>()};

// Convolution row `oy`, every output channel, into `out` (pixel and block strides as stem_tile).
void conv_row(const StemShape& s, const float* x, const float* weights, const float* bias,
              const StemActivation& act, int64_t oy, float* out, int64_t pixel_stride,
              int64_t block_stride) {
  const int64_t blocks = s.out / 16;
  const int64_t per_group = s.in * s.kernel * s.kernel * 64;
  for (int64_t g = 0; g * 4 < blocks; ++g) {
    const int64_t n = std::min<int64_t>(4, blocks - g * 4);
    for (int64_t x0 = 0; x0 < s.out_w; x0 += kTilePixels) {
      const int64_t pixels = std::min<int64_t>(kTilePixels, s.out_w - x0);
      const int64_t first = x0 * s.stride - s.pad;
      const int64_t last = (x0 + pixels - 1) * s.stride - s.pad + s.kernel - 1;
      const bool edge = first < 0 || last >= s.in_w;
      TileFn tile =
          kTiles[edge ? 1 : 0][static_cast<size_t>(n - 1)][static_cast<size_t>(pixels - 1)];
      // The whole tiles of SqueezeNet's and ResNet's stems (64 outputs) and MobileNetV2's and
      // EfficientNet's (32), nearly all of the work, unrolled, their stride constant (0.97 and
      // 0.99 of the time of a variable stride for SqueezeNet's and ResNet's, about half for
      // MobileNetV2's). Two blocks by 12 pixels, the same 24 accumulators, took 1.13x the time of
      // two by 6.
      if (!edge && pixels == kTilePixels && (s.kernel == 3 || s.kernel == 7)) {
        if (n == 4 && s.stride == 2) {
          tile = s.kernel == 3 ? stem_tile<4, kTilePixels, false, 3, 2>
                               : stem_tile<4, kTilePixels, false, 7, 2>;
        } else if (n == 4) {
          tile = s.kernel == 3 ? stem_tile<4, kTilePixels, false, 3>
                               : stem_tile<4, kTilePixels, false, 7>;
        } else if (n == 2 && s.kernel == 3) {
          tile = s.stride == 2 ? stem_tile<2, kTilePixels, false, 3, 2>
                               : stem_tile<2, kTilePixels, false, 3>;
        }
      }
      tile(s, x, weights + g * per_group, bias != nullptr ? bias + g * 64 : nullptr, act, oy, x0,
           out + x0 * pixel_stride + g * 4 * block_stride, pixel_stride, block_stride);
    }
  }
}

// Pooled row `py` from the convolution rows in `rows` (NHWC rows, row `first` at the start), into
// y (NHWC or nChw16c).
__attribute__((target("avx512f"))) void pool_row(const StemShape& s, const float* rows,
                                                 int64_t first, int64_t py, float* y) {
  const StemPool& p = s.pool;
  const int64_t row_floats = s.out_w * s.out;
  const int64_t y0 = std::max<int64_t>(0, py * p.stride - p.pad);
  const int64_t y1 = std::min(s.out_h, py * p.stride - p.pad + p.kernel);
  const int64_t plane = p.out_h * p.out_w * 16;
  const bool full_rows = p.kernel == 3 && y1 - y0 == 3;
  for (int64_t px = 0; px < p.out_w; ++px) {
    const int64_t x0 = std::max<int64_t>(0, px * p.stride - p.pad);
    const int64_t x1 = std::min(s.out_w, px * p.stride - p.pad + p.kernel);
    if (full_rows && x1 - x0 == 3) {
      // A whole 3x3 window (nearly all of them): its 9 loads per block unrolled.
      const float* r = rows + (y0 - first) * row_floats + x0 * s.out;
      for (int64_t c = 0; c < s.out; c += 16) {
        __m512 m = _mm512_loadu_ps(r + c);
#pragma GCC unroll 3
        for (int64_t dy = 0; dy < 3; ++dy) {
#pragma GCC unroll 3
          for (int64_t dx = 0; dx < 3; ++dx) {
            m = _mm512_max_ps(m, _mm512_loadu_ps(r + dy * row_floats + dx * s.out + c));
          }
        }
        float* to = s.blocked ? y + c / 16 * plane + (py * p.out_w + px) * 16
                              : y + (py * p.out_w + px) * s.out + c;
        _mm512_storeu_ps(to, m);
      }
      continue;
    }
    for (int64_t c = 0; c < s.out; c += 16) {
      __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t iy = y0; iy < y1; ++iy) {
        const float* r = rows + (iy - first) * row_floats + c;
        for (int64_t ix = x0; ix < x1; ++ix) m = _mm512_max_ps(m, _mm512_loadu_ps(r + ix * s.out));
      }
      float* to = s.blocked ? y + c / 16 * plane + (py * p.out_w + px) * 16
                            : y + (py * p.out_w + px) * s.out + c;
      _mm512_storeu_ps(to, m);
    }
  }
}
#pragma GCC diagnostic pop
#endif

// The convolution rows pooled rows [py0, py1) read.
std::pair<int64_t, int64_t> rows_for(const StemShape& s, int64_t py0, int64_t py1) {
  const StemPool& p = s.pool;
  return {std::max<int64_t>(0, py0 * p.stride - p.pad),
          std::min(s.out_h, (py1 - 1) * p.stride - p.pad + p.kernel)};
}

}  // namespace

int64_t stem_scratch_floats(const StemShape& s) {
  if (s.pool.kernel == 0) return 0;
  return std::min(s.out_h, (kBandRows - 1) * s.pool.stride + s.pool.kernel) * s.out_w * s.out;
}

std::vector<float> pack_stem_weights(const StemShape& s, const float* oihw) {
  const int64_t groups = (s.out + 63) / 64;
  const int64_t taps = s.in * s.kernel * s.kernel;
  std::vector<float> packed(static_cast<size_t>(groups * taps * 64), 0.0f);
  for (int64_t o = 0; o < s.out; ++o) {
    for (int64_t t = 0; t < taps; ++t) {
      packed[static_cast<size_t>((o / 64 * taps + t) * 64 + o % 64)] =
          oihw[static_cast<size_t>(o * taps + t)];
    }
  }
  return packed;
}

void stem_conv_f32(const StemShape& s, const float* x, const float* weights, const float* bias,
                   StemActivation act, float* y, float* scratch, int threads) {
  KILN_CHECK(has_fast_silu(), "stem_conv_f32 needs AVX-512 (check has_fast_silu() first)");
  KILN_CHECK(s.out % 16 == 0 && s.out > 0 && s.in > 0 && s.kernel > 0 && threads > 0,
             "stem_conv_f32: output channels must be a positive multiple of 16");
#if KILN_STEM_X86
  // Without pooling: the output's rows shared out; NHWC pixels are `out` floats apart, nChw16c
  // ones 16 with a block every plane.
  const int64_t plane = s.out_h * s.out_w * 16;
  const int64_t pixel_stride = s.blocked ? 16 : s.out;
  const int64_t block_stride = s.blocked ? plane : 16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t team = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);
    if (s.pool.kernel == 0) {
      for (int64_t oy = s.out_h * thread / team; oy < s.out_h * (thread + 1) / team; ++oy) {
        conv_row(s, x, weights, bias, act, oy, y + oy * s.out_w * pixel_stride, pixel_stride,
                 block_stride);
      }
    } else {
      // Bands of pooled rows; the convolution rows a band reads go to this thread's scratch (NHWC
      // rows), the last one kept when the next band starts on it.
      float* rows = scratch + thread * stem_scratch_floats(s);
      const int64_t row_floats = s.out_w * s.out;
      const int64_t py_end = s.pool.out_h * (thread + 1) / team;
      int64_t have_first = 0;
      int64_t have_last = 0;  // rows [have_first, have_last) are in `rows`
      for (int64_t py = s.pool.out_h * thread / team; py < py_end; py += kBandRows) {
        const int64_t band_end = std::min(py_end, py + kBandRows);
        const auto [first, last] = rows_for(s, py, band_end);
        int64_t from = first;
        if (have_last > first && have_first <= first) {
          std::memmove(rows, rows + (first - have_first) * row_floats,
                       static_cast<size_t>((have_last - first) * row_floats) * sizeof(float));
          from = have_last;
        }
        for (int64_t oy = from; oy < last; ++oy) {
          conv_row(s, x, weights, bias, act, oy, rows + (oy - first) * row_floats, s.out, 16);
        }
        have_first = first;
        have_last = last;
        for (int64_t r = py; r < band_end; ++r) pool_row(s, rows, first, r, y);
      }
    }
    _mm_setcsr(csr);
  }
#else
  (void)x, (void)weights, (void)bias, (void)act, (void)y, (void)scratch;
#endif
}

}  // namespace kiln::compiler::cpu
