// SPDX-License-Identifier: Apache-2.0
// Lowering convolutions: to kiln's own kernels where they apply and are faster (stem, 1x1,
// Winograd, excitation), else to oneDNN with fused post-ops (bias, activation, residual Add as a
// sum); and the layout a model's convolutions run in.
#include "compiler/targets/cpu/lower_conv.h"

#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/conv1x1.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/silu.h"
#include "compiler/targets/cpu/squeeze_excite.h"
#include "compiler/targets/cpu/stem.h"
#include "compiler/targets/cpu/winograd_conv.h"
#include "core/env.h"

namespace kiln::compiler::cpu {

using dnnl::memory;
using Arg = PrimitiveStep::Arg;

namespace {

// A dense 3x3 stride-1 2-D convolution: oneDNN runs it as Winograd over nChw16c (F(2x2, 3x3),
// or F(4x4, 3x3) at larger batches).
bool is_winograd_shape(const ConvSetup& s) {
  return s.weights.size() == 4 && s.weights[2] == 3 && s.weights[3] == 3 && s.strides[0] == 1 &&
         s.strides[1] == 1 && s.dilates[0] == 0 && s.dilates[1] == 0;
}

// Whether a blocked model runs `s` as Winograd: not from fewer than 32 input channels, where the
// transforms outweigh the saved multiplications (SqueezeNet's 16 -> 64 expands at 55x55, batch
// 16: direct jit over nChw16c takes 0.6 of jit_wino_4x3's time).
bool runs_winograd(const ConvSetup& s) {
  return is_winograd_shape(s) && s.weights[1] >= 32;
}

}  // namespace

bool lower_conv(ProgramBuilder& b, const Node& conv, const Node* add) {
  if (add == nullptr && lower_stem(b, conv)) return true;
  // Before the 1x1's spread k x k: ResNet-50's layer-4 3x3s run faster as Winograd.
  if (lower_winograd_conv(b, conv, add)) return true;
  if (lower_conv1x1(b, conv, add)) return true;
  std::optional<ConvSetup> s = conv_setup(conv, /*allow_bf16=*/true);
  // A squeeze-and-excitation gate scales the weights; the convolution reads the ungated input.
  const std::optional<ConvGate> gate = absorbed_gate(conv);
  const Value* x = gate ? gate->x : conv.input(0);
  // Weights that arrive at run time (a graph input, another node's output) are reordered into the
  // primitive's layout by a step of their own on every run.
  if (!s || (s->weights_const == nullptr && gate) || !b.has_buffer(x)) return false;
  if (s->has_bias && s->bias_const == nullptr && !is_f32(conv.input(2))) return false;
  const Value* y = add != nullptr ? add->output(0) : conv.output(0);
  if (!same_float({conv.input(0), conv.input(1), conv.output(0), y})) return false;
  const Value* residual = nullptr;
  if (add != nullptr) residual = add->input(add->input(0) == conv.output(0) ? 1 : 0);
  // The Conv's own Relu (conv_activation_fusion's) is the first post-op.
  const Tail tail = trailing_eltwise(
      y, 2,
      s->relu ? std::vector<Eltwise>{{dnnl::algorithm::eltwise_relu}} : std::vector<Eltwise>{});
  // A trailing SiLU runs as kiln's own pass over the output (silu.h), not as oneDNN's swish.
  const bool own_silu = has_fast_silu() && dtype(y) == DType::kF32 && !tail.ops.empty() &&
                        tail.ops.back().algorithm == dnnl::algorithm::eltwise_swish &&
                        tail.ops.back().alpha == 1.0f;
  std::vector<Eltwise> post_tail = tail.ops;
  if (own_silu) post_tail.pop_back();

  const memory::data_type type = dnnl_type(dtype(y));
  const memory::desc any_src(s->src, type, memory::format_tag::any);
  const memory::desc any_weights(s->weights, type, memory::format_tag::any);
  const memory::desc any_dst(s->dst, type, memory::format_tag::any);
  const memory::desc bias = s->has_bias ? plain_desc(s->bias) : memory::desc();
  dnnl::primitive_attr attr = scratchpad_attr();
  dnnl::post_ops post;
  if (s->relu) post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (add != nullptr) post.append_sum(1.0f);
  append(post, post_tail);
  attr.set_post_ops(post);
  // A channel-blocked model's 3x3 stride-2 convolutions of a batch of one run in the layouts
  // oneDNN picks (NHWC brgconv), reorders on both sides included: ResNet-50's three took 0.6-0.8
  // of the time of jit:avx512_core over nChw16c (docs/performance.md, "Convolution layouts").
  const bool nhwc_s2 = b.conv_layout() == ConvLayout::kBlocked16 && s->src.size() == 4 &&
                       s->src[0] == 1 && s->weights.size() == 4 && s->weights[2] == 3 &&
                       s->weights[3] == 3 && s->strides[0] == 2 && s->strides[1] == 2 &&
                       dtype(y) == DType::kF32;
  const bool blocked = b.conv_layout() == ConvLayout::kBlocked16 && !nhwc_s2;
  // (nChw16c only describes 2-D convolutions: a 1-D or 3-D one runs in the layouts oneDNN picks.)
  const memory::desc blocked_dst =
      s->dst.size() == 4 ? memory::desc(s->dst, memory::data_type::f32, memory::format_tag::nChw16c)
                         : memory::desc();
  const bool wino = blocked && runs_winograd(*s);
  auto make = [&](const memory::desc& src0) {
    memory::desc src = src0;
    if (blocked && src.data.format_kind == dnnl_format_kind_any && s->src.size() == 4 &&
        s->src[1] >= 16) {
      src = memory::desc(s->src, memory::data_type::f32, memory::format_tag::nChw16c);
    }
    if (wino) {
      try {
        dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
            any_weights, bias, blocked_dst, s->strides, s->dilates, s->pad_begin, s->pad_end);
        return dnnl::convolution_forward::primitive_desc(desc, attr, b.engine());
      } catch (const dnnl::error&) {
      }
    }
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, any_weights,
        bias, blocked && s->dst.size() == 4 ? blocked_dst : any_dst, s->strides, s->dilates,
        s->pad_begin, s->pad_end);
    return dnnl::convolution_forward::primitive_desc(desc, attr, b.engine());
  };
  // A blocked input is read as it is when oneDNN has a fast kernel for it (no reorder); otherwise,
  // and for plain inputs, oneDNN picks.
  const memory::desc x_layout = b.layout_of(x);
  std::optional<dnnl::convolution_forward::primitive_desc> picked;
  if (!is_row_major(x_layout) && !nhwc_s2) {
    try {
      picked = make(x_layout);
      const std::string impl = picked->impl_info_str();
      if (impl.find("ref") != std::string::npos || impl.find("gemm") != std::string::npos) {
        picked.reset();  // slower than a reorder into the layout oneDNN prefers
      }
    } catch (const dnnl::error&) {
      picked.reset();
    }
  }
  dnnl::convolution_forward::primitive_desc pd = picked ? *picked : make(any_src);

  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(x, pd.src_desc()), pd.src_desc(), {}});
  const int gated_weights = gate ? b.scratch(pd.weights_desc().get_size()) : -1;
  if (gate) {
    args.push_back({DNNL_ARG_WEIGHTS, gated_weights, pd.weights_desc(), {}});
  } else if (s->weights_const != nullptr) {
    args.push_back(
        {DNNL_ARG_WEIGHTS, -1, pd.weights_desc(),
         pack(b.engine(), s->user_weights, s->weights_const->raw_data(), pd.weights_desc())});
  } else {
    const int w = reorder_into(b, conv, b.plain(conv.input(1)), s->user_weights, pd.weights_desc());
    args.push_back({DNNL_ARG_WEIGHTS, w, pd.weights_desc(), {}});
  }
  if (s->has_bias) {
    if (s->bias_const != nullptr) {
      args.push_back({DNNL_ARG_BIAS, -1, pd.bias_desc(),
                      constant_memory(b.engine(), *s->bias_const, pd.bias_desc())});
    } else {
      args.push_back({DNNL_ARG_BIAS, b.plain(conv.input(2)), pd.bias_desc(), {}});
    }
  }
  std::optional<PrimitiveStep::Prefill> prefill;
  int residual_buffer = -1;
  int dst = -1;
  if (residual != nullptr) {
    residual_buffer = b.buffer_of(residual);
    const memory::desc from = b.layout_of(residual);
    if (from == pd.dst_desc() && b.can_overwrite(residual, *add) && !is_graph_output(tail.out)) {
      // The residual is dead after the Add: the sum post-op adds into its buffer (no copy).
      dst = residual_buffer;
      residual_buffer = -1;
    } else {
      prefill = PrimitiveStep::Prefill{
          dnnl::reorder(dnnl::reorder::primitive_desc(b.engine(), from, b.engine(), pd.dst_desc())),
          residual_buffer, from};
    }
  }
  if (dst < 0) dst = b.define(tail.out, pd.dst_desc());
  args.push_back({DNNL_ARG_DST, dst, pd.dst_desc(), {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  std::string kind = s->relu ? "Conv+Relu" : "Conv";
  if (add != nullptr) kind += "+Add";
  const bool in_place = residual != nullptr && !prefill;
  std::unique_ptr<Step> step =
      primitive_step(b, conv, kind, dnnl::convolution_forward(pd), std::move(args), tail,
                     std::move(prefill), residual_buffer);
  // A GlobalAveragePool of the output (squeeze-and-excitation's, the classifier's) in the pass
  // that applies SiLU (or in a pass of the step's own).
  memory::desc pooled;
  if (const Node* pool = pooled_by(b, tail.out, pd.dst_desc(), &pooled)) {
    const memory::dims dims = pd.dst_desc().dims();
    step = pool_after(std::move(step), dst, static_cast<size_t>(dims[0] * ((dims[1] + 15) / 16)),
                      static_cast<size_t>(dims[2] * dims[3]), own_silu,
                      b.define(pool->output(0), pooled));
    b.mark_fused(pool);
  } else if (own_silu) {
    step = silu_after(std::move(step), dst, pd.dst_desc().get_size() / sizeof(float));
  }
  if (gate) {
    step = gate_weights(b, *gate, s->user_weights, s->weights_const->raw_data(), pd.weights_desc(),
                        gated_weights, std::move(step));
    b.mark_fused(gate->mul);
  }
  finish(b, std::move(step), tail);
  if (in_place) b.rebind(tail.out, dst);
  b.mark_fused(&conv);
  return true;
}

Result<ConvLayout> choose_conv_layout(const Graph& graph) {
  const std::string forced = env_flag_string(EnvFlag::kCpuConvLayout);
  if (forced == "any") return ConvLayout::kAny;
  if (forced == "blocked16") return ConvLayout::kBlocked16;
  if (forced != "auto") {
    return invalid_argument_error(fmt::format(
        "KILN_CPU_CONV_LAYOUT is \"{}\"; use auto, any or blocked16 (or unset it)", forced));
  }
  // Winograd pays where a quarter of the work or more is in 3x3 stride-1 convolutions with 32 or
  // more input and output channels: ResNet's, SqueezeNet's expands, and DenseNet's 128 -> 32
  // growth convolutions (35% less CPU time than NHWC brgconv at 56x56 and 28x28, batch 16; their
  // Concats read nChw16c pieces in place, concat.cc). Depthwise-separable networks (MobileNetV2,
  // EfficientNet) run faster blocked: oneDNN's jit_1x1 and jit_dw kernels over nChw16c move less
  // memory than brgconv over NHWC (10 to 20% less CPU time).
  double all = 0;
  double winograd = 0;
  int convs = 0;
  int depthwise = 0;
  for (const auto& node : graph.nodes()) {
    if (node->kind() != OpKind::kConv) continue;
    std::optional<ConvSetup> s = conv_setup(*node);
    if (!s) continue;
    double macs = 1;
    for (memory::dim d : s->dst) macs *= static_cast<double>(d);
    for (size_t i = 1; i < s->weights.size(); ++i) macs *= static_cast<double>(s->weights[i]);
    all += macs;
    // Winograd pays from 32 input channels: SqueezeNet's 27x27 and 13x13 expands at batch 16
    // (F(4x4, 3x3), jit_wino_4x3) took 0.4 of brgconv's time in NHWC, and at batch 1 the
    // network runs 0.94-0.95 of its NHWC time blocked, with its stem on kiln's kernel and its
    // Concat copied as blocks (docs/performance.md, "Convolution layouts").
    if (is_winograd_shape(*s) && s->weights[0] >= 32 && s->weights[1] >= 32) {
      winograd += macs;
    }
    ++convs;
    // Grouped weights [g, O/g, I/g, k...] with one input and one output channel per group.
    if (s->weights.size() == 5 && s->weights[0] > 1 && s->weights[1] == 1 && s->weights[2] == 1) {
      ++depthwise;
    }
  }
  if (all > 0 && winograd >= 0.25 * all) return ConvLayout::kBlocked16;
  return convs > 0 && depthwise * 10 >= convs ? ConvLayout::kBlocked16 : ConvLayout::kAny;
}

Status check_conv_flags() {
  KILN_RETURN_IF_ERROR(check_conv1x1_flag());
  KILN_RETURN_IF_ERROR(check_winograd_flag());
  return check_stem_flag();
}

}  // namespace kiln::compiler::cpu
