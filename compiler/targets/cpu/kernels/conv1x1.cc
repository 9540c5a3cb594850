// SPDX-License-Identifier: Apache-2.0
// 1x1 convolutions of a batch of one over nChw16c: an AVX-512 GEMM [out, in] x [in, pixels] with
// bias, residual and Relu applied in registers, on the OpenMP team oneDNN runs on.
#include "compiler/targets/cpu/kernels/conv1x1.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

#include "compiler/targets/cpu/kernels/silu.h"
#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_CONV1X1_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

constexpr int kTileBlocks = 4;  // output channel blocks of 16 in a tile
constexpr int kTilePixels = 6;  // pixels in a tile: 24 accumulators, 4 weights, a broadcast
// Input channel blocks per pass, at most: 24 KiB of weights, which stay in a 32 KiB L1 beside the
// tile's inputs (a 32 KiB chunk filled it: ResNet-50 ran 2.5% slower, paired).
constexpr int64_t kChunkBlocks = 6;

// One tile's work: `blocks` input channel blocks from `x` (a block every `x_stride` floats) and
// `w` (OIhw16i64o: 64 output channels for each input channel), into `y` (an output block every
// `y_stride` floats).
struct Tile {
  const float* w;
  const float* x;
  int64_t x_stride;
  int64_t blocks;
  const float* bias;      // first pass: added (null: none)
  const float* residual;  // first pass: added (null: none), with y's strides
  float* y;
  int64_t y_stride;
  bool first;              // starts from bias and residual, else from y (a previous chunk's sums)
  bool relu;               // last pass: max(0, .)
  const char* prefetch;    // lines to bring into L2 meanwhile (the next chunk's weights)
  int64_t prefetch_lines;  // at most 16 x blocks
};

#if KILN_CONV1X1_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in silu.cc

template <int kBlocks, int kPixels>
__attribute__((target("avx512f"))) void run_tile(const Tile& t) {
  __m512 acc[kBlocks][kPixels];
#pragma GCC unroll 4
  for (int j = 0; j < kBlocks; ++j) {
    const __m512 bias = t.bias != nullptr ? _mm512_loadu_ps(t.bias + 16 * j) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) {
      const int64_t at = j * t.y_stride + p * 16;
      if (!t.first) {
        acc[j][p] = _mm512_loadu_ps(t.y + at);
      } else if (t.residual != nullptr) {
        acc[j][p] = _mm512_add_ps(bias, _mm512_loadu_ps(t.residual + at));
      } else {
        acc[j][p] = bias;
      }
    }
  }
  for (int64_t cb = 0; cb < t.blocks; ++cb) {
    const float* x = t.x + cb * t.x_stride;
    const float* w = t.w + cb * 16 * 64;
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (cb * 16 + i < t.prefetch_lines)
        _mm_prefetch(t.prefetch + (cb * 16 + i) * 64, _MM_HINT_T1);
      __m512 wv[kBlocks];
#pragma GCC unroll 4
      for (int j = 0; j < kBlocks; ++j) wv[j] = _mm512_loadu_ps(w + i * 64 + j * 16);
        // Each input value is broadcast into a register once for the tile's 4 output blocks: an
        // FMA with a broadcast memory operand per block would need more loads than the two load
        // ports give for two FMAs a cycle (4 + 28 against 28 FMAs for the 4 x 7 tile this was).
#pragma GCC unroll 8
      for (int p = 0; p < kPixels; ++p) {
        const __m512 xb = _mm512_set1_ps(x[p * 16 + i]);
#pragma GCC unroll 4
        for (int j = 0; j < kBlocks; ++j) acc[j][p] = _mm512_fmadd_ps(wv[j], xb, acc[j][p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < kBlocks; ++j) {
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) {
      __m512 v = acc[j][p];
      if (t.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      _mm512_storeu_ps(t.y + j * t.y_stride + p * 16, v);
    }
  }
}
#pragma GCC diagnostic pop

using TileFn = void (*)(const Tile&);

template <int kBlocks, size_t... kPixels>
constexpr std::array<TileFn, sizeof...(kPixels)> tile_row(std::index_sequence<kPixels...>) {
  return {run_tile<kBlocks, static_cast<int>(kPixels) + 1>...};
}

using TileTable = std::array<std::array<TileFn, kTilePixels>, kTileBlocks>;
constexpr TileTable tile_table() {
  constexpr auto pixels = std::make_index_sequence<kTilePixels>();
  return {tile_row<1>(pixels), tile_row<2>(pixels), tile_row<3>(pixels), tile_row<4>(pixels)};
}

// kTiles[blocks - 1][pixels - 1]: the tile of that many output blocks and pixels.
constexpr TileTable kTiles = tile_table();

// Output blocks [block, block + blocks) for pixels [first, last), every input chunk.
void run_part(const Conv1x1Shape& s, const float* x, const float* weights, const float* bias,
              const float* residual, bool relu, float* y, int64_t block, int64_t blocks,
              int64_t first, int64_t last) {
  const int64_t in_blocks = s.in / 16;
  const int64_t plane = s.pixels * 16;
  const int64_t tiles = (last - first + kTilePixels - 1) / kTilePixels;
  // Passes of about equal size: 16 blocks as 6, 6 and 4, 8 as 4 and 4.
  const int64_t chunks = (in_blocks + kChunkBlocks - 1) / kChunkBlocks;
  const int64_t even = (in_blocks + chunks - 1) / chunks;
  for (int64_t c0 = 0; c0 < in_blocks; c0 += even) {
    const int64_t chunk = std::min(even, in_blocks - c0);
    const bool more = c0 + chunk < in_blocks;
    // The next chunk's weights (64 floats, a line each 16) spread over the tiles.
    const int64_t next_lines = std::min(even, in_blocks - c0 - chunk) * 16 * 4;
    const int64_t per_tile = (next_lines + tiles - 1) / tiles;
    int64_t tile = 0;
    for (int64_t p = first, pixels = 0; p < last; p += pixels, ++tile) {
      pixels = std::min<int64_t>(kTilePixels, last - p);
      const int64_t from = std::min(next_lines, tile * per_tile);
      const int64_t at = block * plane + p * 16;
      const Tile t{
          weights + block / 4 * s.in * 64 + block % 4 * 16 + c0 * 16 * 64,
          x + c0 * plane + p * 16,
          plane,
          chunk,
          bias != nullptr ? bias + block * 16 : nullptr,
          residual != nullptr ? residual + at : nullptr,
          y + at,
          plane,
          c0 == 0,
          relu && c0 + chunk == in_blocks,
          reinterpret_cast<const char*>(weights + block / 4 * s.in * 64 + (c0 + chunk) * 16 * 64) +
              from * 64,
          more ? std::max<int64_t>(0, std::min(per_tile, next_lines - from)) : 0};
      kTiles[static_cast<size_t>(blocks - 1)][static_cast<size_t>(pixels - 1)](t);
    }
  }
}
#endif

}  // namespace

void conv1x1_group_f32(const Conv1x1Shape& s, const float* x, const float* weights, int64_t group,
                       int64_t first, int64_t last, float* y) {
#if KILN_CONV1X1_X86
  const int64_t block = group * kTileBlocks;
  run_part(s, x, weights, nullptr, nullptr, /*relu=*/false, y, block,
           std::min<int64_t>(kTileBlocks, s.out / 16 - block), first, last);
#endif
}

void conv1x1_f32(const Conv1x1Shape& s, const float* x, const float* weights, const float* bias,
                 const float* residual, bool relu, float* y) {
  KILN_CHECK(has_fast_silu(), "conv1x1_f32 needs AVX-512 (check has_fast_silu() first)");
  KILN_CHECK(s.in % 16 == 0 && s.out % 16 == 0 && s.in > 0 && s.out > 0 && s.pixels > 0,
             "conv1x1_f32: channels must be positive multiples of 16");
#if KILN_CONV1X1_X86
  const int64_t groups = (s.out / 16 + kTileBlocks - 1) / kTileBlocks;
  std::atomic<int64_t> next{0};
#pragma omp parallel
  {
    // Items of a group of output channels over a range of pixels, about 4 a thread, claimed one at
    // a time: a thread on a slower core takes fewer. This VM's two cores often run at different
    // speeds (134 and 77 GFLOP/s at once while another tenant loads one), and an even static
    // split waits for the slower (docs/performance.md, "The own 1x1 convolution"). Pixels are
    // split only where there are fewer groups than that, into parts of at least two tiles.
    const int64_t threads = omp_get_num_threads();
    const int64_t want = (4 * threads + groups - 1) / groups;
    const int64_t splits = std::max<int64_t>(1, std::min(want, s.pixels / (2 * kTilePixels)));
    const int64_t part =
        ((s.pixels + splits - 1) / splits + kTilePixels - 1) / kTilePixels * kTilePixels;
    const int64_t parts = (s.pixels + part - 1) / part;
    const int64_t items = groups * parts;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);
    for (int64_t item = next++; item < items; item = next++) {
      const int64_t group = item / parts;
      const int64_t first = item % parts * part;
      const int64_t block = group * kTileBlocks;
      run_part(s, x, weights, bias, residual, relu, y, block,
               std::min<int64_t>(kTileBlocks, s.out / 16 - block), first,
               std::min(s.pixels, first + part));
    }
    _mm_setcsr(csr);
  }
#endif
}

}  // namespace kiln::compiler::cpu
