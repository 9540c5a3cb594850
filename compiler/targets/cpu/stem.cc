// SPDX-License-Identifier: Apache-2.0
// A network's first convolution as kiln's own AVX-512 kernel: it reads the NCHW image as it comes
// (oneDNN's brgconv wants NHWC, a reorder of the whole image first), applies the activation
// (Relu, Clip, SiLU) in registers, writes the layout the next step reads (no reorder after), and
// pools bands of its output rows while they are in cache (oneDNN writes the whole convolution
// output, and its MaxPool reads it back).
#include "compiler/targets/cpu/stem.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "compiler/targets/cpu/dnnl_steps.h"
#include "compiler/targets/cpu/sigmoid_avx512.h"
#include "compiler/targets/cpu/silu.h"
#include "core/check.h"
#include "core/env.h"

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
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in silu.cc
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

namespace {

enum class Choice { kAuto, kOneDnn };

Result<Choice> forced_choice() {
  const std::string v = env_flag_string(EnvFlag::kCpuStem);
  if (v == "auto") return Choice::kAuto;
  if (v == "onednn") return Choice::kOneDnn;
  return invalid_argument_error(
      fmt::format("KILN_CPU_STEM is \"{}\"; use auto or onednn (or unset it)", v));
}

class StemStep final : public Step {
 public:
  StemStep(StemShape shape, std::vector<float> weights, std::vector<float> bias, StemActivation act,
           int x, int y, int scratch, int threads)
      : shape_(shape),
        weights_(std::move(weights)),
        bias_(std::move(bias)),
        act_(act),
        x_(x),
        y_(y),
        scratch_(scratch),
        threads_(threads) {}

  Status run(StepContext& ctx) const override {
    auto at = [&](int buffer) {
      return static_cast<float*>(ctx.data[static_cast<size_t>(buffer)]);
    };
    stem_conv_f32(shape_, at(x_), weights_.data(), bias_.empty() ? nullptr : bias_.data(), act_,
                  at(y_), scratch_ >= 0 ? at(scratch_) : nullptr, threads_);
    return Status();
  }

 private:
  StemShape shape_;
  std::vector<float> weights_;  // pack_stem_weights
  std::vector<float> bias_;
  StemActivation act_;
  int x_;
  int y_;
  int scratch_;  // -1: none (no pooling)
  int threads_;
};

// The MaxPool that is `v`'s only reader, as StemPool over a `h` x `w` input: a square window of
// at most 3 with equal strides, no dilation, the same pads on both sides or ceil_mode's extra
// bottom/right (windows cut at the edges either way, as a max ignores padding).
std::optional<StemPool> sole_max_pool(const Value* v, int64_t h, int64_t w, const Node** pool) {
  if (v->uses().size() != 1 || is_graph_output(v)) return std::nullopt;
  const Node* p = v->uses()[0].node;
  if (p->kind() != OpKind::kMaxPool || p->graph() != v->producer()->graph()) return std::nullopt;
  for (int i = 1; i < p->num_outputs(); ++i) {
    if (!p->output(i)->uses().empty() || is_graph_output(p->output(i))) return std::nullopt;
  }
  const auto& op = p->attrs<ops::MaxPool>();
  if (!op.kernel_shape || op.storage_order != 0) return std::nullopt;
  const std::vector<int64_t> in = {h, w};
  Result<WindowGeometry> g = forward_window(
      in, *op.kernel_shape, {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0});
  if (!g.ok() || g->rank() != 2 || g->kernel[0] != g->kernel[1] || g->kernel[0] > 3 ||
      g->strides[0] != g->strides[1] || g->dilations[0] != 1 || g->dilations[1] != 1 ||
      g->pad_begin[0] != g->pad_begin[1] || g->pad_begin[0] >= g->kernel[0]) {
    return std::nullopt;
  }
  const Shape& y = p->output(0)->tensor_type().shape();
  if (y.rank() != 4 || y[2] != g->out[0] || y[3] != g->out[1]) return std::nullopt;
  // Every window holds at least one input pixel (ceil_mode's last one may hang over the edge).
  for (int a = 0; a < 2; ++a) {
    if ((g->out[static_cast<size_t>(a)] - 1) * g->strides[0] - g->pad_begin[0] >=
        in[static_cast<size_t>(a)]) {
      return std::nullopt;
    }
  }
  *pool = p;
  return StemPool{g->kernel[0], g->strides[0], g->pad_begin[0], g->out[0], g->out[1]};
}

}  // namespace

Status check_stem_flag() {
  return forced_choice().status();
}

bool lower_stem(ProgramBuilder& b, const Node& conv) {
  if (!has_fast_silu()) return false;
  Result<Choice> choice = forced_choice();
  if (!choice.ok() || *choice == Choice::kOneDnn) return false;
  std::optional<ConvSetup> s = conv_setup(conv);
  if (!s || s->weights_const == nullptr || s->weights_const->dtype() != DType::kF32 ||
      s->weights.size() != 4 || s->src.size() != 4 || s->src[0] != 1 || s->src[1] > 4 ||
      s->weights[2] != s->weights[3] || s->weights[2] > 11 || s->strides[0] != s->strides[1] ||
      s->dilates[0] != 0 || s->dilates[1] != 0 || s->pad_begin[0] != s->pad_begin[1] ||
      s->pad_begin[0] >= s->weights[2] || s->weights[0] % 16 != 0) {
    return false;
  }
  if (s->has_bias && (s->bias_const == nullptr || s->bias_const->dtype() != DType::kF32)) {
    return false;
  }
  const Value* x = conv.input(0);
  if (!b.has_buffer(x) || !is_row_major(b.layout_of(x)) || x->tensor_type().dtype != DType::kF32 ||
      conv.output(0)->tensor_type().dtype != DType::kF32) {
    return false;
  }
  const Tail tail = trailing_eltwise(conv.output(0), 1);
  StemActivation act;
  if (!tail.ops.empty()) {
    const Eltwise& e = tail.ops[0];
    using Kind = StemActivation::Kind;
    if (e.algorithm == dnnl::algorithm::eltwise_relu && e.alpha == 0.0f) {
      act.kind = Kind::kRelu;
    } else if (e.algorithm == dnnl::algorithm::eltwise_clip_v2 && e.alpha <= e.beta) {
      act = {Kind::kClip, e.alpha, e.beta};
    } else if (e.algorithm == dnnl::algorithm::eltwise_swish && e.alpha == 1.0f) {
      act.kind = Kind::kSilu;
    } else {
      return false;
    }
    // The convolution's own Relu (fused earlier) then another activation: left to oneDNN.
    if (s->relu && act.kind != Kind::kRelu) return false;
  } else if (s->relu) {
    act.kind = StemActivation::Kind::kRelu;
  }
  StemShape shape{s->src[1],       s->src[2],     s->src[3], s->weights[2], s->strides[0],
                  s->pad_begin[0], s->weights[0], s->dst[2], s->dst[3]};
  shape.blocked = b.conv_layout() == ConvLayout::kBlocked16;
  // The window of the last output pixel ends inside the padded input.
  if ((shape.out_h - 1) * shape.stride - shape.pad >= shape.in_h ||
      (shape.out_w - 1) * shape.stride - shape.pad >= shape.in_w) {
    return false;
  }
  const Node* pool = nullptr;
  // Pooling needs the Relu's output (or the convolution's) to have the pool as its only reader.
  if (std::optional<StemPool> p = sole_max_pool(tail.out, shape.out_h, shape.out_w, &pool)) {
    shape.pool = *p;
  }
  const Value* y = pool != nullptr ? pool->output(0) : tail.out;
  const dnnl::memory::dims dims = to_dims(y->tensor_type().shape());
  const dnnl::memory::desc layout(
      dims, dnnl::memory::data_type::f32,
      shape.blocked ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nhwc);

  // A loaded artifact may hold the weights packed for oneDNN: read as plain values.
  const Tensor weights = plain_constant(b.engine(), *s->weights_const);
  std::vector<float> bias;
  if (s->has_bias) {
    const Tensor plain_bias = plain_constant(b.engine(), *s->bias_const);
    const float* from = plain_bias.data<float>();
    bias.assign(from, from + shape.out);
    bias.resize(static_cast<size_t>((shape.out + 63) / 64 * 64), 0.0f);
  }
  const int threads = std::max(1, omp_get_max_threads());
  const int x_buffer = b.buffer_of(x);
  const int scratch =
      shape.pool.kernel != 0
          ? b.scratch(static_cast<size_t>(stem_scratch_floats(shape) * threads) * sizeof(float))
          : -1;
  const int out = b.define(y, layout);
  auto step = std::make_unique<StemStep>(shape, pack_stem_weights(shape, weights.data<float>()),
                                         std::move(bias), act, x_buffer, out, scratch, threads);
  step->node = &conv;
  step->kind = std::string(s->relu ? "Conv+Relu" : "Conv") + tail.kinds +
               (pool != nullptr ? "+MaxPool" : "");
  step->reads.push_back(x_buffer);
  step->writes.push_back(out);
  if (scratch >= 0) step->writes.push_back(scratch);
  b.add_step(std::move(step));
  for (const Node* n : tail.nodes) b.mark_fused(n);
  if (pool != nullptr) b.mark_fused(pool);
  b.mark_fused(&conv);
  return true;
}

}  // namespace kiln::compiler::cpu
