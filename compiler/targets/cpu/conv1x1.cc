// SPDX-License-Identifier: Apache-2.0
// 1x1 convolutions of a batch of one over nChw16c: an AVX-512 GEMM [out, in] x [in, pixels] with
// bias, residual and Relu applied in registers, on the OpenMP team oneDNN runs on.
#include "compiler/targets/cpu/conv1x1.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "compiler/targets/cpu/dnnl_steps.h"
#include "compiler/targets/cpu/silu.h"
#include "compiler/targets/cpu/squeeze_excite.h"
#include "core/check.h"
#include "core/env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_CONV1X1_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

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
    // split waits for the slower (docs/performance.md, "Session 9"). Pixels are split only where
    // there are fewer groups than that, into parts of at least two tiles.
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

namespace {

// Where conv1x1_f32 is faster than oneDNN's jit_1x1 in a model (docs/performance.md, "Session 8's
// main" and "Session 10"). From 64 input channels to 256 outputs or more it splits by channels and
// wins at every size (ResNet-50's expanding 1x1s, SqueezeNet's 1000-way classifier). To fewer
// outputs it split by pixels and lost in a model while its passes filled L1 (DenseNet-121 1.044x
// slower); with passes of at most 96 input channels it wins there as well, paired against
// jit_1x1: ResNet-50 0.973-0.979, DenseNet-121 0.980, SqueezeNet 0.980, MobileNetV2 0.993-0.998,
// EfficientNet-B0 0.996. Outputs not a multiple of 64 (MobileNetV2's 24, 32, 96, 160) leave a tile
// of one to three blocks and stay with oneDNN; from 16 or 32 channels it is memory-bound. At 7x7
// and less it wins everywhere (0.84-0.90), the weights outweighing the activations. A stride-2 1x1
// is judged as the stride-1 one over its compacted input, which is how it runs.
bool prefer_own(const Conv1x1Shape& s) {
  if (s.pixels <= 7 * 7) return true;
  return s.in >= 64 && (s.out >= 256 || s.out % 64 == 0);
}

// A k x k convolution's input as the 1x1 convolution's: for each tap (ky, kx) and block of 16
// input channels, the pixels the tap reads for every output pixel (zeros outside the image), so
// that channel block t * channels / 16 + c of `cols` ([k k channels / 16][out pixels][16]) is tap
// t of block c of the input (nChw16c).
struct Im2col {
  int64_t channels = 0;
  int64_t in_h = 0;
  int64_t in_w = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad_top = 0;
  int64_t pad_left = 0;
  int64_t out_h = 0;
  int64_t out_w = 0;
};

void im2col_blocked(const Im2col& g, const float* x, float* cols) {
  const int64_t blocks = g.channels / 16;
  const int64_t taps = g.kernel * g.kernel;
  const int64_t pixels = g.out_h * g.out_w;
#pragma omp parallel for schedule(static)
  for (int64_t tb = 0; tb < taps * blocks; ++tb) {
    const int64_t t = tb / blocks;
    const int64_t ky = t / g.kernel;
    const int64_t kx = t % g.kernel;
    const float* plane = x + tb % blocks * g.in_h * g.in_w * 16;
    float* to = cols + tb * pixels * 16;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const int64_t iy = oy * g.stride - g.pad_top + ky;
      for (int64_t ox = 0; ox < g.out_w; ++ox, to += 16) {
        const int64_t ix = ox * g.stride - g.pad_left + kx;
        if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) {
          std::memset(to, 0, 16 * sizeof(float));
        } else {
          std::memcpy(to, plane + (iy * g.in_w + ix) * 16, 16 * sizeof(float));
        }
      }
    }
  }
}

class Conv1x1Step final : public Step {
 public:
  Conv1x1Step(Conv1x1Shape shape, memory weights, std::vector<float> bias, bool relu, int x,
              int residual, int y, std::optional<Im2col> im2col = std::nullopt, int cols = -1)
      : shape_(shape),
        weights_(std::move(weights)),
        bias_(std::move(bias)),
        relu_(relu),
        x_(x),
        residual_(residual),
        y_(y),
        im2col_(im2col),
        cols_(cols) {}

  Status run(StepContext& ctx) const override {
    auto at = [&](int buffer) {
      return static_cast<float*>(ctx.data[static_cast<size_t>(buffer)]);
    };
    const float* x = at(x_);
    if (im2col_) {
      im2col_blocked(*im2col_, x, at(cols_));
      x = at(cols_);
    }
    conv1x1_f32(shape_, x, static_cast<const float*>(weights_.get_data_handle()),
                bias_.empty() ? nullptr : bias_.data(), residual_ >= 0 ? at(residual_) : nullptr,
                relu_, at(y_));
    return Status();
  }

 private:
  Conv1x1Shape shape_;
  memory weights_;  // OIhw16i64o (k x k: [out][tap][in] as a 1x1's)
  std::vector<float> bias_;
  bool relu_;
  int x_;
  int residual_;  // -1: none
  int y_;
  std::optional<Im2col> im2col_;  // a k x k or stride-2 convolution: its input spread into cols_
  int cols_;
};

// W [out][in][k][k] as a 1x1 convolution's over the taps' blocks: [out][k k in], tap-major.
std::vector<float> tap_major(const float* w, int64_t out, int64_t in, int64_t taps) {
  std::vector<float> m(static_cast<size_t>(out * taps * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t c = 0; c < in; ++c) {
      for (int64_t t = 0; t < taps; ++t) {
        m[static_cast<size_t>((o * taps + t) * in + c)] = w[(o * in + c) * taps + t];
      }
    }
  }
  return m;
}

// The same bytes as tap_major() reordered into OIhw16i64o, described as a layout of W's own dims
// [out][in][k][k] (blocks of 64 outputs, then taps, then blocks of 16 inputs): pack() reaches it
// from W in one reorder, and it is an exact packing of W (the constant can leave the graph, and an
// artifact stores it as it is). Needs whole blocks of 16 inputs; a zero desc otherwise.
memory::desc tap_major_layout(const memory::dims& w) {
  if (w.size() != 4 || w[1] % 16 != 0) return memory::desc();
  memory::desc layout(w, memory::data_type::f32, memory::format_tag::OIhw16i64o);
  dnnl_blocking_desc_t& blocking = layout.data.format_desc.blocking;
  const int64_t block = 16 * 64;
  const int64_t in_blocks = w[1] / 16;
  blocking.strides[1] = block;
  blocking.strides[3] = in_blocks * block;
  blocking.strides[2] = w[3] * in_blocks * block;
  blocking.strides[0] = w[2] * w[3] * in_blocks * block;
  return layout;
}

}  // namespace

Status check_conv1x1_flag() {
  return kernel_choice(EnvFlag::kCpuConv1x1).status();
}

bool lower_conv1x1(ProgramBuilder& b, const Node& conv, const Node* add) {
  if (!has_fast_silu() || b.conv_layout() != ConvLayout::kBlocked16) return false;
  Result<KernelChoice> choice = kernel_choice(EnvFlag::kCpuConv1x1);
  if (!choice.ok() || *choice == KernelChoice::kOneDnn) return false;
  std::optional<ConvSetup> s = conv_setup(conv);
  if (!s || s->weights_const == nullptr || s->weights_const->dtype() != DType::kF32 ||
      s->weights.size() != 4 || s->src.size() != 4 || s->src[0] != 1 ||
      s->strides[0] != s->strides[1] || s->strides[0] < 1 || s->strides[0] > 2 ||
      s->weights[1] % 16 != 0 || absorbed_gate(conv)) {
    return false;
  }
  const int64_t k = s->weights[2];
  const bool pointwise = k == 1 && s->weights[3] == 1 && s->pad_begin[0] == 0 &&
                         s->pad_begin[1] == 0 && s->pad_end[0] == 0 && s->pad_end[1] == 0;
  // A k x k convolution to 7x7 or less runs as the 1x1 over its input spread by taps (im2col):
  // there the weights outweigh the activations, and the kernel prefetches them where oneDNN's
  // Winograd F(2x2, 3x3) streams 16/9 as many (ResNet-50's layer-4 3x3s: 512 x 512 x 3 x 3; the
  // stride-1 ones now run as kiln's own Winograd, faster still: winograd_conv.h).
  const bool spread = !pointwise && k == s->weights[3] && k <= 7 && s->dilates[0] == 0 &&
                      s->dilates[1] == 0 && s->dst[2] * s->dst[3] <= 7 * 7 && s->weights[0] >= 256;
  if (!pointwise && !spread) return false;
  if (s->has_bias && (s->bias_const == nullptr || s->bias_const->dtype() != DType::kF32)) {
    return false;
  }
  const Value* x = conv.input(0);
  const Value* y = add != nullptr ? add->output(0) : conv.output(0);
  if (!b.has_buffer(x) || !same_float({x, conv.output(0), y}) ||
      y->tensor_type().dtype != DType::kF32) {
    return false;
  }
  // Output channels past a multiple of 16 fill the last block of nChw16c's padding (zero weights
  // and bias: zeros there, as oneDNN leaves them): SqueezeNet's 1000-way classifier.
  const int64_t out_padded = (s->weights[0] + 15) / 16 * 16;
  const int64_t pixels = s->dst[2] * s->dst[3];
  const Conv1x1Shape shape{pointwise ? s->weights[1] : k * k * s->weights[1], out_padded, pixels};
  if (pointwise && *choice == KernelChoice::kAuto && !prefer_own(shape)) return false;
  const memory::desc src(s->src, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc dst(s->dst, memory::data_type::f32, memory::format_tag::nChw16c);
  // A Relu of the convolution's own comes before the residual; the kernel applies one at the end.
  if (s->relu && add != nullptr) return false;
  const Tail tail = trailing_eltwise(y, 1);
  if (!tail.ops.empty() &&
      (tail.ops[0].algorithm != dnnl::algorithm::eltwise_relu || tail.ops[0].alpha != 0.0f)) {
    return false;
  }
  const Value* residual = nullptr;
  if (add != nullptr) {
    residual = other_input(*add, conv.output(0));
    if (residual == nullptr || residual == conv.output(0) || residual == x ||
        !b.has_buffer(residual) || b.layout_of(residual) != dst) {
      return false;
    }
  }

  memory weights;
  if (pointwise) {
    weights =
        pack(b.engine(), s->user_weights, s->weights_const->raw_data(),
             memory::desc(s->weights, memory::data_type::f32, memory::format_tag::OIhw16i64o));
  } else if (const memory::desc layout = tap_major_layout(s->weights); !layout.is_zero()) {
    weights = pack(b.engine(), s->user_weights, s->weights_const->raw_data(), layout);
  } else {
    // The tap-major matrix reordered here (not pack(): it is no constant's bytes).
    // From plain values (a loaded artifact may hold the weights packed for oneDNN).
    std::vector<float> m = tap_major(plain_constant(b.engine(), *s->weights_const).data<float>(),
                                     s->weights[0], s->weights[1], k * k);
    const memory::dims dims = {s->weights[0], shape.in, 1, 1};
    memory from(memory::desc(dims, memory::data_type::f32, memory::format_tag::oihw), b.engine(),
                m.data());
    weights = packed_memory(
        memory::desc(dims, memory::data_type::f32, memory::format_tag::OIhw16i64o), b.engine());
    dnnl::stream stream(b.engine());
    dnnl::reorder(from, weights).execute(stream, from, weights);
    stream.wait();
  }
  std::vector<float> bias;
  if (s->has_bias) {
    const Tensor plain_bias = plain_constant(b.engine(), *s->bias_const);
    const float* from = plain_bias.data<float>();
    bias.assign(from, from + s->weights[0]);
    bias.resize(static_cast<size_t>(shape.out), 0.0f);
  }
  // An input in another layout (a stride-2 3x3's NHWC output) is reordered into nChw16c.
  const int x_buffer = b.in_layout(x, src);
  int residual_buffer = residual != nullptr ? b.buffer_of(residual) : -1;
  int out = -1;
  // The residual is dead after the Add: the sums go into its buffer.
  const bool in_place =
      residual != nullptr && b.can_overwrite(residual, *add) && !is_graph_output(tail.out);
  if (in_place) {
    out = residual_buffer;
  } else {
    out = b.define(tail.out, dst);
  }
  const bool relu = s->relu || !tail.ops.empty();
  std::optional<Im2col> im2col;
  int cols = -1;
  // A k x k convolution's input spread by taps; a stride-2 1x1's compacted the same way (every
  // other pixel of every other row: ResNet-50's downsamples), so that the kernel reads whole
  // lines from L2 instead of every other line of an input that is four times as large (paired
  // against the strided kernel it replaced: 0.989, 0.990; with layer 3's on it too, a further
  // 0.990, 0.991).
  if (spread || s->strides[0] == 2) {
    im2col = Im2col{s->weights[1],   s->src[2],       s->src[3], k,        s->strides[0],
                    s->pad_begin[0], s->pad_begin[1], s->dst[2], s->dst[3]};
    cols = b.scratch(static_cast<size_t>(shape.in * pixels) * sizeof(float));
  }
  auto step = std::make_unique<Conv1x1Step>(shape, std::move(weights), std::move(bias), relu,
                                            x_buffer, residual_buffer, out, im2col, cols);
  step->node = &conv;
  step->kind =
      std::string(s->relu ? "Conv+Relu" : "Conv") + (add != nullptr ? "+Add" : "") + tail.kinds;
  step->reads.push_back(x_buffer);
  if (!in_place && residual_buffer >= 0) step->reads.push_back(residual_buffer);
  step->writes.push_back(out);
  if (cols >= 0) step->writes.push_back(cols);
  std::unique_ptr<Step> wrapped = std::move(step);
  // A GlobalAveragePool of the output (ResNet's classifier's) in a pass of the step's own.
  memory::desc pooled;
  if (const Node* pool = pooled_by(b, tail.out, dst, &pooled)) {
    wrapped = pool_after(std::move(wrapped), out, static_cast<size_t>(shape.out / 16),
                         static_cast<size_t>(shape.pixels), /*silu=*/false,
                         b.define(pool->output(0), pooled));
    b.mark_fused(pool);
  }
  b.add_step(std::move(wrapped));
  for (const Node* n : tail.nodes) b.mark_fused(n);
  if (in_place) b.rebind(tail.out, out);
  b.mark_fused(&conv);
  return true;
}

}  // namespace kiln::compiler::cpu
