// SPDX-License-Identifier: Apache-2.0
// Squeeze-and-excitation (reduce 1x1 + SiLU, expand 1x1 + Sigmoid on one pixel) as two AVX-512
// matrix-vector products in one step.
#include "compiler/targets/cpu/excitation.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compiler/targets/cpu/kernels/silu.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_EXCITATION_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// A 1x1 convolution of one group and constant f32 weights (and bias, when it has one) on a batch
// of one pixel: its weights as [O, I] and its bias (zeros without one). nullopt otherwise.
struct OnePixelConv {
  int64_t in = 0, out = 0;
  const float* weights = nullptr;  // [out, in], in `held`
  Tensor held;
  std::vector<float> bias;
};

std::optional<OnePixelConv> one_pixel_conv(const Node& conv, const dnnl::engine& engine) {
  if (conv.kind() != OpKind::kConv) return std::nullopt;
  std::optional<ConvSetup> s = conv_setup(conv);
  if (!s || s->relu || s->weights_const == nullptr || s->weights_const->dtype() != DType::kF32 ||
      s->weights.size() != 4 || s->weights[2] != 1 || s->weights[3] != 1 || s->src.size() != 4 ||
      s->src[0] != 1 || s->src[2] != 1 || s->src[3] != 1 || s->dst[2] != 1 || s->dst[3] != 1) {
    return std::nullopt;
  }
  if (s->has_bias && (s->bias_const == nullptr || s->bias_const->dtype() != DType::kF32)) {
    return std::nullopt;
  }
  OnePixelConv c;
  c.out = s->weights[0];
  c.in = s->weights[1];
  // Plain values: a loaded artifact may hold the weights packed for oneDNN.
  c.held = plain_constant(engine, *s->weights_const);
  c.weights = c.held.data<float>();
  c.bias.assign(static_cast<size_t>(c.out), 0.0f);
  if (s->has_bias) {
    const Tensor bias = plain_constant(engine, *s->bias_const);
    std::memcpy(c.bias.data(), bias.data<float>(), c.bias.size() * sizeof(float));
  }
  return c;
}

// The single eltwise node after `y` (its tail) when it is `algorithm` (alpha 1 for swish).
std::optional<Tail> only(const Value* y, dnnl::algorithm algorithm) {
  Tail tail = trailing_eltwise(y);
  if (tail.ops.size() != 1 || tail.ops[0].algorithm != algorithm ||
      (algorithm == dnnl::algorithm::eltwise_swish && tail.ops[0].alpha != 1.0f)) {
    return std::nullopt;
  }
  return tail;
}

// Whether channel c of a [1, C, 1, 1] tensor in `layout` is its element c.
bool channels_in_order(const memory::desc& layout, int64_t channels) {
  return is_row_major(layout) || layout == memory::desc({1, channels, 1, 1}, memory::data_type::f32,
                                                        memory::format_tag::nChw16c);
}

#if KILN_EXCITATION_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in silu.cc
// hidden[r] = bias[r] + w[r, :] . x for r < rows (w row-major, `cols` long rows).
__attribute__((target("avx512f"))) void rows_dot(const float* w, const float* bias, const float* x,
                                                 int64_t rows, int64_t cols, float* hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; c += 16) {
      const auto m = static_cast<__mmask16>(cols - c >= 16 ? 0xffff : (1u << (cols - c)) - 1);
      acc =
          _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, row + c), _mm512_maskz_loadu_ps(m, x + c), acc);
    }
    hidden[r] = bias[r] + _mm512_reduce_add_ps(acc);
  }
}

// out[c] = bias[c] + sum_r hidden[r] wt[r, c] for c < padded (wt row-major, `padded` long rows,
// a multiple of 16).
__attribute__((target("avx512f"))) void columns_axpy(const float* wt, const float* bias,
                                                     const float* hidden, int64_t rows,
                                                     int64_t padded, float* out) {
  for (int64_t c = 0; c < padded; c += 16) {
    __m512 acc = _mm512_loadu_ps(bias + c);
    for (int64_t r = 0; r < rows; ++r) {
      acc = _mm512_fmadd_ps(_mm512_set1_ps(hidden[r]), _mm512_loadu_ps(wt + r * padded + c), acc);
    }
    _mm512_storeu_ps(out + c, acc);
  }
}
#pragma GCC diagnostic pop
#else
void rows_dot(const float*, const float*, const float*, int64_t, int64_t, float*) {}
void columns_axpy(const float*, const float*, const float*, int64_t, int64_t, float*) {}
#endif

class ExcitationStep final : public Step {
 public:
  ExcitationStep(OnePixelConv reduce, const OnePixelConv& expand, bool padded_out, int x, int gate,
                 int scratch)
      : reduce_(std::move(reduce)),
        channels_(expand.out),
        padded_((expand.out + 15) / 16 * 16),
        padded_out_(padded_out),
        x_(x),
        gate_(gate),
        scratch_(scratch) {
    reduce_weights_.assign(reduce_.weights, reduce_.weights + reduce_.out * reduce_.in);
    reduce_.weights = reduce_weights_.data();
    // The expansion's weights transposed, [reduced, padded], so that each reduced value scales a
    // row of 16-wide vectors; zeros in the padding.
    expand_t_.assign(static_cast<size_t>(expand.in * padded_), 0.0f);
    for (int64_t c = 0; c < channels_; ++c) {
      for (int64_t r = 0; r < expand.in; ++r) {
        expand_t_[static_cast<size_t>(r * padded_ + c)] = expand.weights[c * expand.in + r];
      }
    }
    expand_bias_ = expand.bias;
    expand_bias_.resize(static_cast<size_t>(padded_), 0.0f);
    reads = {x};
    writes = {gate, scratch};
  }

  Status run(StepContext& ctx) const override {
    const auto* x = static_cast<const float*>(ctx.data[static_cast<size_t>(x_)]);
    auto* hidden = static_cast<float*>(ctx.data[static_cast<size_t>(scratch_)]);
    auto* gate = static_cast<float*>(ctx.data[static_cast<size_t>(gate_)]);
    // A plain destination holds `channels_` floats: the last vector goes through the scratch.
    float* out = padded_out_ ? gate : hidden + reduce_.out;
#if KILN_EXCITATION_X86
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);  // denormals flushed, as in silu.cc
#endif
    rows_dot(reduce_.weights, reduce_.bias.data(), x, reduce_.out, reduce_.in, hidden);
    silu_f32(hidden, static_cast<size_t>(reduce_.out));
    columns_axpy(expand_t_.data(), expand_bias_.data(), hidden, reduce_.out, padded_, out);
#if KILN_EXCITATION_X86
    _mm_setcsr(csr);
#endif
    sigmoid_f32(out, static_cast<size_t>(channels_));
    if (padded_out_) {
      std::fill(gate + channels_, gate + padded_, 0.0f);  // nChw16c's padding stays zero
    } else {
      std::memcpy(gate, out, static_cast<size_t>(channels_) * sizeof(float));
    }
    return Status();
  }

 private:
  OnePixelConv reduce_;
  std::vector<float> reduce_weights_;
  std::vector<float> expand_t_;
  std::vector<float> expand_bias_;
  int64_t channels_;
  int64_t padded_;
  bool padded_out_;
  int x_;
  int gate_;
  int scratch_;
};

}  // namespace

bool lower_excitation(ProgramBuilder& b, const Node& reduce) {
  if (!has_fast_silu() || reduce.kind() != OpKind::kConv || !reduce.has_input(0) ||
      b.sum_partner(&reduce) != nullptr) {
    return false;
  }
  const Value* x = reduce.input(0);
  std::optional<OnePixelConv> r = one_pixel_conv(reduce, b.engine());
  if (!r || !b.has_buffer(x) || x->tensor_type().dtype != DType::kF32) return false;
  std::optional<Tail> silu = only(reduce.output(0), dnnl::algorithm::eltwise_swish);
  if (!silu) return false;
  const Node* expand = sole_user(silu->out);
  if (expand == nullptr || expand->kind() != OpKind::kConv || expand->input(0) != silu->out ||
      b.sum_partner(expand) != nullptr) {
    return false;
  }
  std::optional<OnePixelConv> e = one_pixel_conv(*expand, b.engine());
  if (!e || e->in != r->out) return false;
  std::optional<Tail> sigmoid = only(expand->output(0), dnnl::algorithm::eltwise_logistic);
  if (!sigmoid) return false;

  int x_buffer = b.buffer_of(x);
  if (!channels_in_order(b.layout_of(x), r->in)) x_buffer = b.plain(x);
  // The gate in the layout the convolution would have written it in (blocked: nChw16c).
  const bool blocked = b.conv_layout() == ConvLayout::kBlocked16;
  const int gate = b.define(
      sigmoid->out,
      blocked ? memory::desc({1, e->out, 1, 1}, memory::data_type::f32, memory::format_tag::nChw16c)
              : memory::desc());
  const int64_t padded = (e->out + 15) / 16 * 16;
  const int scratch = b.scratch(static_cast<size_t>(r->out + padded) * sizeof(float));
  auto step = std::make_unique<ExcitationStep>(std::move(*r), *e, blocked, x_buffer, gate, scratch);
  step->node = &reduce;
  step->kind = "Conv" + silu->kinds + "+Conv" + sigmoid->kinds;
  b.add_step(std::move(step));
  for (const Node* n : silu->nodes) b.mark_fused(n);
  for (const Node* n : sigmoid->nodes) b.mark_fused(n);
  b.mark_fused(expand);
  b.mark_fused(&reduce);
  return true;
}

}  // namespace kiln::compiler::cpu
