// SPDX-License-Identifier: Apache-2.0
// Lowering a network's first convolution (with its activation and MaxPool) to kiln's own kernel
// (kernels/stem.h).
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
#include "compiler/targets/cpu/kernels/stem.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/silu.h"
#include "core/check.h"
#include "core/env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_STEM_X86 1
#endif

namespace kiln::compiler::cpu {

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
