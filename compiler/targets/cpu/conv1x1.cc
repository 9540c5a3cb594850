// SPDX-License-Identifier: Apache-2.0
// Lowering 1x1 convolutions of a batch of one over nChw16c to kiln's own AVX-512 kernel
// (kernels/conv1x1.h) where it is faster than oneDNN's.
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
#include "compiler/targets/cpu/kernels/conv1x1.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/silu.h"
#include "compiler/targets/cpu/squeeze_excite.h"
#include "core/check.h"
#include "core/env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// Where conv1x1_f32 is faster than oneDNN's jit_1x1 in a model (docs/performance.md, "The own 1x1
// convolution"). From 64 input channels to 256 outputs or more it splits by channels and
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
