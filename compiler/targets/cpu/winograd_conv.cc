// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) and F(4x4, 3x3) over nChw16c of a batch of one: the input's 4x4 (6x6)
// tiles transformed (V = B^T d B), 16 (36) products M = U V on the own 1x1 kernel, and 2x2 (4x4)
// outputs (A^T M A) with bias and Relu, on the OpenMP team oneDNN runs on.
//
// At 14x14 with 256 channels (ResNet-50's layer 3) F(2x2)'s products are GEMMs of 256 x 256 over
// 49 tiles, where the own kernel runs faster than oneDNN's jit_fp32_wino_2x3 (0.65-0.72 against
// 0.93-1.0 ms in the model); at 28x28 with 128 (layer 2) F(4x4)'s over 49 tiles are faster than
// oneDNN's jit_wino_4x3; at 7x7 with 512 (layer 4) F(2x2) is faster than the 1x1 over taps. At
// 56x56 with 64 (layer 1) oneDNN's is faster, so that stays with it.
#include "compiler/targets/cpu/winograd_conv.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/targets/cpu/kernels/conv1x1.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/silu.h"
#include "compiler/targets/cpu/squeeze_excite.h"
#include "core/env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_WINOGRAD_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// The sizes of one convolution: `in` and `out` channels, `h` x `w` pixels in and out, tiles of
// alpha - 2 outputs square (`tiles_h` x `tiles_w`, the last row and column cut where they do not
// divide).
struct Shape {
  int64_t in = 0;
  int64_t out = 0;
  int64_t h = 0;
  int64_t w = 0;
  int64_t tiles_h = 0;
  int64_t tiles_w = 0;
  int alpha = 4;  // input tile side: 4 for F(2x2, 3x3), 6 for F(4x4, 3x3)
  int64_t tiles() const { return tiles_h * tiles_w; }
  int64_t planes() const { return alpha * alpha; }
};

// F(4x4, 3x3)'s G (Lavin and Gray), rows of the 6x3 matrix.
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

// U = G g G^T for every (output, input) pair, planes p = alpha a + b, each plane packed as the 1x1
// kernel's OIhw16i64o ([out/64][in/16][16][64]): 64 outputs of one input at a time, which lie
// together there (loops over them vectorize). F(2x2, 3x3)'s G has entries 1, 0 and +-1/2, and its
// sums are those of winograd_weights.cc's transform_2x3; F(4x4, 3x3)'s are summed in double and
// rounded once.
void transform_weights(const float* g, const Shape& s, float* u) {
  constexpr int kW = 64;
  const int64_t in_blocks = s.in / 16;
  const int64_t plane = s.out * s.in;
  float k[9][kW];  // the 64 kernels' taps
  for (int64_t og = 0; og < s.out / kW; ++og) {
    for (int64_t c = 0; c < s.in; ++c) {
      for (int o = 0; o < kW; ++o) {
        for (int e = 0; e < 9; ++e) k[e][o] = g[((og * kW + o) * s.in + c) * 9 + e];
      }
      float* to = u + ((og * in_blocks + c / 16) * 16 + c % 16) * kW;
      if (s.alpha == 4) {
        float t[4][3][kW];  // G g: rows of the kernels combined
        for (int j = 0; j < 3; ++j) {
          for (int o = 0; o < kW; ++o) {
            const float g0 = k[j][o], g1 = k[3 + j][o], g2 = k[6 + j][o];
            t[0][j][o] = g0;
            t[1][j][o] = 0.5f * ((g0 + g1) + g2);
            t[2][j][o] = 0.5f * ((g0 - g1) + g2);
            t[3][j][o] = g2;
          }
        }
        for (int a = 0; a < 4; ++a) {
          float* row = to + a * 4 * plane;
          for (int o = 0; o < kW; ++o) {
            const float g0 = t[a][0][o], g1 = t[a][1][o], g2 = t[a][2][o];
            row[o] = g0;
            row[plane + o] = 0.5f * ((g0 + g1) + g2);
            row[2 * plane + o] = 0.5f * ((g0 - g1) + g2);
            row[3 * plane + o] = g2;
          }
        }
      } else {
        double t[6][3][kW];  // G g
        for (int a = 0; a < 6; ++a) {
          for (int j = 0; j < 3; ++j) {
            for (int o = 0; o < kW; ++o) {
              t[a][j][o] = kG4[a][0] * k[j][o] + kG4[a][1] * k[3 + j][o] + kG4[a][2] * k[6 + j][o];
            }
          }
        }
        for (int a = 0; a < 6; ++a) {
          for (int b = 0; b < 6; ++b) {
            float* row = to + (a * 6 + b) * plane;
            for (int o = 0; o < kW; ++o) {
              row[o] = static_cast<float>(t[a][0][o] * kG4[b][0] + t[a][1][o] * kG4[b][1] +
                                          t[a][2][o] * kG4[b][2]);
            }
          }
        }
      }
    }
  }
}

#if KILN_WINOGRAD_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // _mm512_setzero_ps, as in silu.cc
// V = B^T d B for the 4x4 input tile of output tile (ty, tx) of channel block `cb` (zeros outside
// the image), into plane p's [in/16][tiles][16] at v + p * in * tiles.
__attribute__((target("avx512f"))) void input_tile(const Shape& s, const float* x, float* v,
                                                   int64_t cb, int64_t ty, int64_t tx) {
  const float* plane = x + cb * s.h * s.w * 16;
  __m512 d[4][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const int64_t iy = 2 * ty - 1 + i;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t ix = 2 * tx - 1 + j;
      d[i][j] = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w
                    ? _mm512_loadu_ps(plane + (iy * s.w + ix) * 16)
                    : _mm512_setzero_ps();
    }
  }
  __m512 t[4][4];  // B^T d
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
    t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
    t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
    t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
  }
  const int64_t stride = s.in * s.tiles();
  float* to = v + (cb * s.tiles() + ty * s.tiles_w + tx) * 16;
#pragma GCC unroll 4
  for (int a = 0; a < 4; ++a) {
    _mm512_storeu_ps(to + (a * 4 + 0) * stride, _mm512_sub_ps(t[a][0], t[a][2]));
    _mm512_storeu_ps(to + (a * 4 + 1) * stride, _mm512_add_ps(t[a][1], t[a][2]));
    _mm512_storeu_ps(to + (a * 4 + 2) * stride, _mm512_sub_ps(t[a][2], t[a][1]));
    _mm512_storeu_ps(to + (a * 4 + 3) * stride, _mm512_sub_ps(t[a][1], t[a][3]));
  }
}

// y's 2x2 outputs of tile (ty, tx) of output block `kb`: A^T m A from the 16 planes of m
// ([out/16][tiles][16] each), plus the bias, then max(0, .) when `relu`.
__attribute__((target("avx512f"))) void output_tile(const Shape& s, const float* m,
                                                    const float* bias, bool relu, float* y,
                                                    int64_t kb, int64_t ty, int64_t tx) {
  const int64_t stride = s.out * s.tiles();
  const float* from = m + (kb * s.tiles() + ty * s.tiles_w + tx) * 16;
  __m512 r[2][4];  // A^T m
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 m0 = _mm512_loadu_ps(from + (0 + j) * stride);
    const __m512 m1 = _mm512_loadu_ps(from + (4 + j) * stride);
    const __m512 m2 = _mm512_loadu_ps(from + (8 + j) * stride);
    const __m512 m3 = _mm512_loadu_ps(from + (12 + j) * stride);
    r[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
    r[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
  }
  const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + kb * 16) : _mm512_setzero_ps();
  float* plane = y + kb * s.h * s.w * 16;
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const int64_t oy = 2 * ty + i;
    if (oy >= s.h) break;
    __m512 o0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]), b);
    __m512 o1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3]), b);
    if (relu) {
      o0 = _mm512_max_ps(o0, _mm512_setzero_ps());
      o1 = _mm512_max_ps(o1, _mm512_setzero_ps());
    }
    _mm512_storeu_ps(plane + (oy * s.w + 2 * tx) * 16, o0);
    if (2 * tx + 1 < s.w) _mm512_storeu_ps(plane + (oy * s.w + 2 * tx + 1) * 16, o1);
  }
}
// F(4x4, 3x3)'s B^T applied to six vectors (a column or a row of the tile).
__attribute__((target("avx512f"))) inline void bt6(const __m512 d[6], __m512 r[6]) {
  const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f);
  const __m512 two = _mm512_set1_ps(2.0f);
  // 4 d0 - 5 d2 + d4
  r[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2], d[4]));
  const __m512 d34 = _mm512_add_ps(d[3], d[4]);   // d3 + d4
  const __m512 d4m3 = _mm512_sub_ps(d[4], d[3]);  // d4 - d3
  const __m512 d12 = _mm512_add_ps(d[1], d[2]);   // d1 + d2
  const __m512 d1m2 = _mm512_sub_ps(d[1], d[2]);  // d1 - d2
  r[1] = _mm512_fnmadd_ps(four, d12, d34);        // -4 (d1 + d2) + d3 + d4
  r[2] = _mm512_fmadd_ps(four, d1m2, d4m3);       // 4 (d1 - d2) - d3 + d4
  const __m512 d3m1 = _mm512_sub_ps(d[3], d[1]);  // d3 - d1
  const __m512 d4m2 = _mm512_sub_ps(d[4], d[2]);  // d4 - d2
  r[3] = _mm512_fmadd_ps(two, d3m1, d4m2);        // -2 d1 - d2 + 2 d3 + d4
  r[4] = _mm512_fnmadd_ps(two, d3m1, d4m2);       // 2 d1 - d2 - 2 d3 + d4
  r[5] = _mm512_fmadd_ps(four, d[1], _mm512_fnmadd_ps(five, d[3], d[5]));
}

// F(4x4, 3x3)'s A^T applied to six vectors: four.
__attribute__((target("avx512f"))) inline void at6(const __m512 m[6], __m512 r[4]) {
  const __m512 a12 = _mm512_add_ps(m[1], m[2]), s12 = _mm512_sub_ps(m[1], m[2]);
  const __m512 a34 = _mm512_add_ps(m[3], m[4]), s34 = _mm512_sub_ps(m[3], m[4]);
  r[0] = _mm512_add_ps(_mm512_add_ps(m[0], a12), a34);
  r[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), s34, s12);
  r[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), a34, a12);
  r[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), s34, s12), m[5]);
}

// input_tile for F(4x4, 3x3): the 6x6 input tile at (4 ty - 1, 4 tx - 1), 36 planes.
__attribute__((target("avx512f"))) void input_tile_4x4(const Shape& s, const float* x, float* v,
                                                       int64_t cb, int64_t ty, int64_t tx) {
  const float* plane = x + cb * s.h * s.w * 16;
  __m512 t[6][6];  // B^T d, by column
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {
    const int64_t ix = 4 * tx - 1 + j;
    __m512 d[6];
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const int64_t iy = 4 * ty - 1 + i;
      d[i] = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w
                 ? _mm512_loadu_ps(plane + (iy * s.w + ix) * 16)
                 : _mm512_setzero_ps();
    }
    __m512 r[6];
    bt6(d, r);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) t[a][j] = r[a];
  }
  const int64_t stride = s.in * s.tiles();
  float* to = v + (cb * s.tiles() + ty * s.tiles_w + tx) * 16;
#pragma GCC unroll 6
  for (int a = 0; a < 6; ++a) {
    __m512 r[6];
    bt6(t[a], r);
#pragma GCC unroll 6
    for (int b = 0; b < 6; ++b) _mm512_storeu_ps(to + (a * 6 + b) * stride, r[b]);
  }
}

// output_tile for F(4x4, 3x3): 4x4 outputs from 36 planes.
__attribute__((target("avx512f"))) void output_tile_4x4(const Shape& s, const float* m,
                                                        const float* bias, bool relu, float* y,
                                                        int64_t kb, int64_t ty, int64_t tx) {
  const int64_t stride = s.out * s.tiles();
  const float* from = m + (kb * s.tiles() + ty * s.tiles_w + tx) * 16;
  __m512 r[4][6];  // A^T m, by column
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {
    __m512 c[6];
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) c[a] = _mm512_loadu_ps(from + (a * 6 + j) * stride);
    __m512 o[4];
    at6(c, o);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) r[i][j] = o[i];
  }
  const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + kb * 16) : _mm512_setzero_ps();
  float* plane = y + kb * s.h * s.w * 16;
  for (int i = 0; i < 4; ++i) {
    const int64_t oy = 4 * ty + i;
    if (oy >= s.h) break;
    __m512 o[4];
    at6(r[i], o);
    for (int j = 0; j < 4 && 4 * tx + j < s.w; ++j) {
      __m512 out = _mm512_add_ps(o[j], b);
      if (relu) out = _mm512_max_ps(out, _mm512_setzero_ps());
      _mm512_storeu_ps(plane + (oy * s.w + 4 * tx + j) * 16, out);
    }
  }
}
#pragma GCC diagnostic pop
#endif

// Counters the team's threads claim work from, a cache line each.
struct alignas(64) Counter {
  std::atomic<int64_t> next{0};
};

class WinogradStep final : public Step {
 public:
  WinogradStep(Shape shape, memory weights, std::vector<float> bias, bool relu, int x, int y, int v,
               int m)
      : shape_(shape),
        weights_(std::move(weights)),
        bias_(std::move(bias)),
        relu_(relu),
        x_(x),
        y_(y),
        v_(v),
        m_(m) {}

  Status run(StepContext& ctx) const override {
#if KILN_WINOGRAD_X86
    auto at = [&](int buffer) {
      return static_cast<float*>(ctx.data[static_cast<size_t>(buffer)]);
    };
    const float* x = at(x_);
    float* y = at(y_);
    float* v = at(v_);
    float* m = at(m_);
    const auto* u = static_cast<const float*>(weights_.get_data_handle());
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    const Shape& s = shape_;
    const Conv1x1Shape product{s.in, s.out, s.tiles()};
    const int64_t rows = s.in / 16 * s.tiles_h;
    const int64_t groups = s.out / 64;
    Counter input, output;
#pragma omp parallel
    {
      const unsigned csr = _mm_getcsr();
      _mm_setcsr(csr | 0x8040);
      // A row of tiles of one channel block at a time.
      for (int64_t item = input.next++; item < rows; item = input.next++) {
        const int64_t cb = item / s.tiles_h;
        const int64_t ty = item % s.tiles_h;
        for (int64_t tx = 0; tx < s.tiles_w; ++tx) {
          if (s.alpha == 6) {
            input_tile_4x4(s, x, v, cb, ty, tx);
          } else {
            input_tile(s, x, v, cb, ty, tx);
          }
        }
      }
#pragma omp barrier
      // 64 output channels over a range of tiles at a time: their products, then their outputs,
      // while the products are still in this core's L2. Tiles are split only where there are
      // fewer groups than threads: a split reads each weight twice. Paired in ResNet-50, two
      // ranges for each of layer 2's two groups read 1.005-1.009 slower than one, four 1.006-1.015
      // slower than two, and layer 3's four groups split in two 1.009-1.011 slower.
      const int64_t threads = omp_get_num_threads();
      const int64_t wanted = std::min(s.tiles() / 12 + 1, (threads + groups - 1) / groups);
      const int64_t part = (s.tiles() + wanted - 1) / wanted;
      // Ranges of `part` tiles: fewer than wanted where the last would start past the end (225
      // tiles wanted in 16 are 15 ranges of 15), which the products cannot take (no tiles).
      const int64_t parts = (s.tiles() + part - 1) / part;
      for (int64_t item = output.next++; item < groups * parts; item = output.next++) {
        const int64_t group = item / parts;
        const int64_t first = item % parts * part;
        const int64_t last = std::min(s.tiles(), first + part);
        for (int64_t p = 0; p < s.planes(); ++p) {
          conv1x1_group_f32(product, v + p * s.in * s.tiles(), u + p * s.out * s.in, group, first,
                            last, m + p * s.out * s.tiles());
        }
        for (int64_t kb = group * 4; kb < group * 4 + 4; ++kb) {
          for (int64_t t = first; t < last; ++t) {
            if (s.alpha == 6) {
              output_tile_4x4(s, m, bias, relu_, y, kb, t / s.tiles_w, t % s.tiles_w);
            } else {
              output_tile(s, m, bias, relu_, y, kb, t / s.tiles_w, t % s.tiles_w);
            }
          }
        }
      }
      _mm_setcsr(csr);
    }
#endif
    return Status();
  }

 private:
  Shape shape_;
  memory weights_;  // planes() planes of U, each OIhw16i64o
  std::vector<float> bias_;
  bool relu_;
  int x_;
  int y_;
  int v_;  // scratch: the transformed input, planes() planes of [in/16][tiles][16]
  int m_;  // scratch: the products, planes() planes of [out/16][tiles][16]
};

// Where the own Winograd is faster than oneDNN's, paired in ResNet-50 (`kiln perf --ab`,
// docs/performance.md, "The own Winograd"): layer 3 (256 at 14x14) 1.040 with oneDNN's over
// the own; layer 2 (128 at 28x28) on top, 0.988-0.994 with the own F(2x2), then 0.984-0.992 with
// F(4x4) over that. Layer 4 (512 at 7x7) ran as the 1x1 over taps (conv1x1.h); as F(2x2) on top
// of the others, 0.981-0.985, though its transformed weights are 16/9 as many. Layer 1 (64 at
// 56x56) on the own was slower: 1.015 with F(2x2), and F(4x4) gained nothing over layer 2's alone
// (0.992).
bool prefer_own(const Shape& s) {
  const int64_t pixels = s.h * s.w;
  return s.in >= 128 && pixels >= 7 * 7 && pixels <= 28 * 28;
}

}  // namespace

Status check_winograd_flag() {
  return kernel_choice(EnvFlag::kCpuWinograd).status();
}

bool lower_winograd_conv(ProgramBuilder& b, const Node& conv, const Node* add) {
  if (add != nullptr || !has_fast_silu() || b.conv_layout() != ConvLayout::kBlocked16) {
    return false;
  }
  Result<KernelChoice> choice = kernel_choice(EnvFlag::kCpuWinograd);
  if (!choice.ok() || *choice == KernelChoice::kOneDnn) return false;
  std::optional<ConvSetup> c = conv_setup(conv);
  if (!c || c->weights_const == nullptr || c->weights_const->dtype() != DType::kF32 ||
      c->weights.size() != 4 || c->src.size() != 4 || c->src[0] != 1 || c->weights[2] != 3 ||
      c->weights[3] != 3 || c->strides[0] != 1 || c->strides[1] != 1 || c->dilates[0] != 0 ||
      c->dilates[1] != 0 || c->pad_begin[0] != 1 || c->pad_begin[1] != 1 || c->pad_end[0] != 1 ||
      c->pad_end[1] != 1 || c->weights[1] != c->src[1] || c->weights[1] % 16 != 0 ||
      c->weights[0] % 64 != 0 || absorbed_gate(conv)) {
    return false;
  }
  if (c->has_bias && (c->bias_const == nullptr || c->bias_const->dtype() != DType::kF32)) {
    return false;
  }
  Shape s{c->weights[1], c->weights[0], c->src[2], c->src[3]};
  // F(4x4, 3x3) past 14x14 (ResNet-50's layer 2: 0.984-0.992 against F(2x2, 3x3) there, paired);
  // at 14x14, 16 tiles of 4x4 leave too few columns for the products (1.004, 1.005 slower).
  s.alpha = s.h * s.w > 14 * 14 ? 6 : 4;
  s.tiles_h = (s.h + s.alpha - 3) / (s.alpha - 2);
  s.tiles_w = (s.w + s.alpha - 3) / (s.alpha - 2);
  if (*choice == KernelChoice::kAuto && !prefer_own(s)) return false;
  const Value* x = conv.input(0);
  if (!b.has_buffer(x) || !same_float({x, conv.output(0)}) ||
      conv.output(0)->tensor_type().dtype != DType::kF32) {
    return false;
  }
  const Tail tail = trailing_eltwise(conv.output(0), 1);
  if (!tail.ops.empty() &&
      (tail.ops[0].algorithm != dnnl::algorithm::eltwise_relu || tail.ops[0].alpha != 0.0f)) {
    return false;
  }

  // The transformed weights are 16/9 of the plain ones and no packing of them: the graph keeps
  // its constant, which an artifact stores, and they are transformed again on load.
  memory weights = packed_memory(
      memory::desc({s.planes() * s.out * s.in}, memory::data_type::f32, memory::format_tag::a),
      b.engine());
  // A loaded artifact may hold the weights packed for oneDNN: transformed from plain values.
  transform_weights(plain_constant(b.engine(), *c->weights_const).data<float>(), s,
                    static_cast<float*>(weights.get_data_handle()));
  std::vector<float> bias;
  if (c->has_bias) {
    const Tensor plain_bias = plain_constant(b.engine(), *c->bias_const);
    const float* from = plain_bias.data<float>();
    bias.assign(from, from + s.out);
  }
  const memory::desc blocked(c->src, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc dst(c->dst, memory::data_type::f32, memory::format_tag::nChw16c);
  const int x_buffer = b.in_layout(x, blocked);
  const int y_buffer = b.define(tail.out, dst);
  const auto plane_bytes = static_cast<size_t>(std::max(s.in, s.out) * s.tiles()) * sizeof(float);
  const int v_buffer = b.scratch(static_cast<size_t>(s.planes()) * plane_bytes);
  const int m_buffer = b.scratch(static_cast<size_t>(s.planes()) * plane_bytes);
  auto step = std::make_unique<WinogradStep>(s, std::move(weights), std::move(bias),
                                             c->relu || !tail.ops.empty(), x_buffer, y_buffer,
                                             v_buffer, m_buffer);
  step->node = &conv;
  step->kind = std::string(c->relu ? "Conv+Relu" : "Conv") + tail.kinds;
  step->reads.push_back(x_buffer);
  step->writes.push_back(y_buffer);
  step->writes.push_back(v_buffer);
  step->writes.push_back(m_buffer);
  b.add_step(std::move(step));
  for (const Node* n : tail.nodes) b.mark_fused(n);
  b.mark_fused(&conv);
  return true;
}

}  // namespace kiln::compiler::cpu
