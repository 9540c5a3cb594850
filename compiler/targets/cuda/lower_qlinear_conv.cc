// SPDX-License-Identifier: Apache-2.0
// Lowering QLinearConv: on cuDNN's int8 graph (qlinear_conv_cudnn.h) or the own int8 implicit GEMM
// (kernels/int8_gemm.h), whichever is timed faster; a residual Add after it fused; the first
// convolution of an image on f16 tensor cores or space-to-depth.
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/autotune.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "compiler/targets/cuda/kernels/int8_gemm.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/qlinear_conv_cudnn.h"
#include "compiler/targets/cuda/quantized.h"
#include "compiler/targets/cuda/tuning.h"
#include "core/env.h"
#include "core/half.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

std::optional<IntConv> int_conv(const Node& node) {
  if (node.kind() != OpKind::kQLinearConv || node.num_inputs() < 8) return std::nullopt;
  const auto& op = node.attrs<ops::QLinearConv>();
  if (!is_static4(node.input(0)) || !is_static4(node.output(0))) return std::nullopt;
  if (op.activation && *op.activation != "SiLU") return std::nullopt;
  if (op.group != 1 && (op.group != node.input(0)->tensor_type().shape()[1] ||
                        op.group != node.output(0)->tensor_type().shape()[1])) {
    return std::nullopt;
  }
  IntConv c;
  std::optional<QParams> x = qparams(node, 1, 2, node.input(0));
  std::optional<QParams> y = qparams(node, 6, 7, node.output(0));
  c.w = node.input(3)->constant_value();
  const Tensor* ws = node.input(4)->constant_value();
  const Tensor* wz = node.input(5)->constant_value();
  if (!x || !y || c.w == nullptr || c.w->dtype() != DType::kI8 || c.w->shape().rank() != 4 ||
      ws == nullptr || ws->dtype() != DType::kF32 || wz == nullptr) {
    return std::nullopt;
  }
  // The input's parameters may be any (an image's QuantizeLinear writes f16 integers for the
  // first convolution); a centered input's must fit (centered_readers, lower_qlinear_conv).
  if (!centerable(*y)) return std::nullopt;
  c.x = *x;
  c.y = *y;
  if (op.activation) c.silu = c.y.scale;
  const int64_t k = c.w->shape()[0];
  if (ws->numel() != 1 && ws->numel() != k) return std::nullopt;
  for (float s : ws->span<float>()) {
    if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
    c.w_scales.push_back(s);
  }
  const auto* zb = static_cast<const uint8_t*>(wz->raw_data());
  for (size_t i = 0; i < wz->nbytes(); ++i) {
    if (zb[i] != 0) return std::nullopt;
  }
  if (node.has_input(8)) {
    c.bias = node.input(8)->constant_value();
    if (c.bias == nullptr || c.bias->dtype() != DType::kI32 || c.bias->numel() != k) {
      return std::nullopt;
    }
  }
  const Shape xs = node.input(0)->tensor_type().shape();
  const Shape yo = node.output(0)->tensor_type().shape();
  c.group = op.group;
  if (xs[1] != c.w->shape()[1] * c.group || yo[1] != k) return std::nullopt;
  const std::vector<int64_t> in_hw = {xs[2], xs[3]};
  Result<WindowGeometry> g = forward_window(in_hw, {c.w->shape()[2], c.w->shape()[3]},
                                            {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>{yo[2], yo[3]}) return std::nullopt;
  c.g = *g;
  return c;
}

namespace {

// s2d_geometry of a window `g` with filter shape `w`.
std::optional<S2d> s2d_window(const WindowGeometry& g_in, const Shape& w, const Shape& x,
                              const Shape& y) {
  if (g_in.strides != std::vector<int64_t>{2, 2} || g_in.dilations != std::vector<int64_t>{1, 1} ||
      x[1] > 4 || x[2] % 2 != 0 || x[3] % 2 != 0) {
    return std::nullopt;
  }
  S2d g;
  for (int d = 0; d < 2; ++d) {
    const int64_t pad = g_in.pad_begin[static_cast<size_t>(d)];
    const int64_t r = w[2 + d];
    g.pre[d] = (pad + 1) / 2;
    g.taps[d] = (r - 1 + 2 * g.pre[d] - pad) / 2 + 1;
    g.post[d] = y[2 + d] - x[2 + d] / 2 - g.pre[d] + g.taps[d] - 1;
    if (g.post[d] < 0) return std::nullopt;
  }
  return g;
}

}  // namespace

std::optional<S2d> s2d_geometry(const IntConv& c, const Shape& x, const Shape& y) {
  return s2d_window(c.g, c.w->shape(), x, y);
}

namespace {

// Whether `buf`, a centered input (f16 or s8) of logical shape `x`, is space-to-depth
// (Stem::kS2d).
bool is_s2d(const Buffer& buf, const Shape& x) {
  return buf.shape.rank() == 4 && buf.shape[2] != x[2];
}

// ---- convolutions on the own int8 implicit GEMM (kernels/int8_gemm.h) ----

// `p` as the own kernel's problem when it has s8 input, no dilation, equal strides 1 or 2, and
// the kernel takes it.
std::optional<Int8Gemm> gemm_problem(const ConvProblem& p) {
  if (p.half || p.dilations != std::vector<int64_t>{1, 1} || p.strides[0] != p.strides[1]) {
    return std::nullopt;
  }
  Int8Gemm g;
  g.n = p.n;
  g.h = p.h;
  g.w = p.w;
  g.c = p.c;
  g.k = p.k;
  g.oh = p.oh;
  g.ow = p.ow;
  g.r = p.r;
  g.s = p.s;
  g.ph = p.pre[0];
  g.pw = p.pre[1];
  g.stride = static_cast<int>(p.strides[0]);
  g.residual = p.residual;
  g.rescale = p.residual_scale;
  g.lo = p.lo;
  g.hi = p.hi;
  g.silu = p.silu;
  if (!int8_gemm_supported(g)) return std::nullopt;
  return g;
}

Status run_gemm(int config, const Int8Gemm& g, const ConvArgs& a, void* stream) {
  return launch_int8_gemm(config, g, a.x, a.w, static_cast<const float*>(a.scale),
                          static_cast<const float*>(a.bias), a.z, a.y, stream);
}

// How a convolution runs: the own kernel's tile configuration (`config` >= 0), else cuDNN's
// `plan` (null when cuDNN has none for `p`, which the caller then retries without the residual).
struct KernelChoice {
  int config = -1;
  std::shared_ptr<ConvPlan> plan;
};

// The fastest of cuDNN's plan and the own kernel's configurations for `g` (`p`'s), timed on
// scratch operands, kept as a tuning choice. KILN_CUDA_INT8_GEMM=0 never takes the own kernel,
// =1 always (its fastest configuration).
Result<KernelChoice> choose_kernel(Builder& b, const ConvProblem& p, const Int8Gemm& g) {
  const char* env = env_flag_c_str(EnvFlag::kCudaInt8Gemm);
  const std::string_view forced(env == nullptr ? "" : env);
  KernelChoice c;
  if (forced == "0" && p.silu == 0.0f) {
    KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p));
    return c;
  }
  const std::string key = "int8 gemm of " + p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key); known != nullptr && forced != "1") {
    std::optional<int32_t> config = choice_value<int32_t>(*known);
    if (config && *config >= 0 && *config < int8_gemm_configs()) {
      b.record_choice(key, *known, false);
      c.config = *config;
      return c;
    }
    if (config && *config == -1 && p.silu == 0.0f) {
      KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p));
      if (c.plan != nullptr) {
        b.record_choice(key, *known, false);
        return c;
      }
    }
  }
  float cudnn_ms = INFINITY;
  if (forced != "1" && p.silu == 0.0f) {  // cuDNN's graph has no SiLU
    float ms = NAN;
    KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p, &ms));
    // A plan chosen from stored tuning comes without its time.
    if (c.plan != nullptr) cudnn_ms = std::isnan(ms) ? plan_ms(b.cudnn(), *c.plan, p) : ms;
  }
  float best_ms = INFINITY;
  for (int config = 0; config < int8_gemm_configs(); ++config) {
    const float ms = scratch_ms(
        p, 0, [&](const ConvArgs& a, cudaStream_t s) { return run_gemm(config, g, a, s); });
    log(LogLevel::kDebug, "cuda target: {}: own {} {:.4f} ms", key, int8_gemm_config_name(config),
        ms);
    if (ms < best_ms) {
      best_ms = ms;
      c.config = config;
    }
  }
  if (!(best_ms < cudnn_ms)) c.config = -1;
  log(LogLevel::kDebug, "cuda target: {}: own {:.4f} ms, cuDNN {:.4f} ms: {}", key, best_ms,
      cudnn_ms, c.config >= 0 ? int8_gemm_config_name(c.config) : "cuDNN");
  if (c.config >= 0) c.plan.reset();
  if (c.config >= 0 || c.plan != nullptr) {
    b.record_choice(key, choice_bytes(static_cast<int32_t>(c.config)), true);
  }
  return c;
}

// The NHWC layout of [n, c, s] with c channels stored.
Int8Layout nhwc_layout(int64_t n, int64_t c, int64_t s) {
  Int8Layout l;
  l.n = n;
  l.c = c;
  l.s = s;
  l.stored_c = c;
  l.nhwc = true;
  return l;
}

// The GPU milliseconds of rounding f16 NHWC [n, c, s] into s8 (launch_quantize8 with scale 1),
// 3 launches after one, replayed as a CUDA graph (candidate_ms: the time of the three); infinity
// when it fails.
float f16_to_s8_ms(int64_t n, int64_t c, int64_t s) {
  const int64_t count = n * c * s;
  const Int8Layout l = nhwc_layout(n, c, s);
  Scratch scratch;
  void* from = scratch.block(static_cast<size_t>(count) * 2, 0x1d);
  void* to = scratch.block(static_cast<size_t>(count), 0);
  scratch.events.resize(2);
  if (from == nullptr || to == nullptr ||
      cudaStreamCreateWithFlags(&scratch.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&scratch.events[0]) != cudaSuccess ||
      cudaEventCreate(&scratch.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return INFINITY;
  }
  return candidate_ms(scratch, [&] {
    return launch_quantize8(Elem::kF16, from, l, to, l, false, 1.0f, 0, -128, 127, scratch.stream)
        .ok();
  });
}

// The same for an f16 output of `p` (the step after an f16-output plan).
float round_ms(const ConvProblem& p) {
  return f16_to_s8_ms(p.n, p.k, p.oh * p.ow);
}

// The plan of an f16-input convolution (half_stem's; `y` its output's parameters): an s8 output
// clamped in the graph, or an f16 output (p.half_out) that a step rounds, whichever runs faster
// with that step counted (the answer stored as a choice too). Sets p's output type and clamp.
Result<std::shared_ptr<ConvPlan>> choose_half_plan(Builder& b, ConvProblem& p, const QParams& y,
                                                   bool relu) {
  auto variant = [&](bool f16_out, float* ms) -> Result<std::shared_ptr<ConvPlan>> {
    p.half_out = f16_out;
    std::tie(p.lo, p.hi) = f16_out ? std::make_pair(-128, 127) : centered_bounds(y, relu);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> plan, choose_plan(b, p, ms));
    if (plan == nullptr && p.lo < 0) {
      // As in lower_qlinear_conv: the s8 saturation alone.
      std::tie(p.lo, p.hi) = std::make_pair(-128, 127);
      KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p, ms));
    }
    return plan;
  };
  p.half_out = false;
  const std::string key = "qconv f16 output of " + p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    if (std::optional<int32_t> f16_out = choice_value<int32_t>(*known)) {
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> plan, variant(*f16_out != 0, nullptr));
      if (plan != nullptr) {
        b.record_choice(key, *known, false);
        return plan;
      }
    }
  }
  float s8_ms = NAN;
  float f16_ms = NAN;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> s8_plan, variant(false, &s8_ms));
  const ConvProblem s8_problem = p;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> f16_plan, variant(true, &f16_ms));
  if (f16_plan != nullptr) f16_ms += round_ms(p);
  // NaN (a stored plan choice without its time) loses to a measured time.
  const bool f16_out = f16_plan != nullptr && (s8_plan == nullptr || !(s8_ms <= f16_ms));
  b.record_choice(key, choice_bytes(static_cast<int32_t>(f16_out ? 1 : 0)), true);
  if (f16_out) return f16_plan;
  p = s8_problem;
  return s8_plan;
}

// Whether the space-to-depth first convolution runs faster on the own s8 kernel (its input
// quantized to s8 by lower_quantize) than on cuDNN's f16 `plan` for `half` (with its rounding
// step): the own kernel's configuration, or -1. Timed on scratch operands, kept as a
// tuning choice; KILN_CUDA_INT8_GEMM=0 or 1 as in choose_kernel.
Result<int> choose_stem(Builder& b, const ConvProblem& half, const ConvPlan* plan,
                        const ConvProblem& s8, const Int8Gemm& g) {
  const char* env = env_flag_c_str(EnvFlag::kCudaInt8Gemm);
  const std::string_view forced(env == nullptr ? "" : env);
  if (forced == "0" && s8.silu == 0.0f) return -1;  // a fused SiLU runs on the own kernel only
  const std::string key = "int8 gemm stem of " + s8.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key); known != nullptr && forced != "1") {
    std::optional<int32_t> config = choice_value<int32_t>(*known);
    if (config && *config >= -1 && *config < int8_gemm_configs() && (*config >= 0 || plan)) {
      b.record_choice(key, *known, false);
      return *config;
    }
  }
  float cudnn_ms = INFINITY;
  if (plan != nullptr && forced != "1") {
    cudnn_ms = plan_ms(b.cudnn(), *plan, half) + (half.half_out ? round_ms(half) : 0.0f);
  }
  int best = -1;
  float best_ms = INFINITY;
  for (int config = 0; config < int8_gemm_configs(); ++config) {
    const float ms = scratch_ms(
        s8, 0, [&](const ConvArgs& a, cudaStream_t st) { return run_gemm(config, g, a, st); });
    if (ms < best_ms) {
      best_ms = ms;
      best = config;
    }
  }
  if (!(best_ms < cudnn_ms)) best = -1;
  log(LogLevel::kDebug, "cuda target: {}: own {:.4f} ms, cuDNN {:.4f} ms: {}", key, best_ms,
      cudnn_ms, best >= 0 ? int8_gemm_config_name(best) : "cuDNN");
  if (best >= 0 || plan != nullptr)
    b.record_choice(key, choice_bytes(static_cast<int32_t>(best)), true);
  return best;
}

// The s8 filter of `c` (on `channels` input channels) rearranged for the space-to-depth problem
// `p` (s2d_geometry): s8 [K, taps, taps, 16] with channel (dy * 2 + dx) * channels + ci.
std::vector<uint8_t> s2d_filter(const IntConv& c, int64_t channels, const ConvProblem& p) {
  const Shape ws = c.w->shape();
  const int64_t pad_h = c.g.pad_begin[0];
  const int64_t pad_w = c.g.pad_begin[1];
  std::vector<uint8_t> out(static_cast<size_t>(p.k * p.r * p.s * p.c), 0);
  const auto* w = c.w->data<int8_t>();
  for (int64_t k = 0; k < p.k; ++k) {
    for (int64_t by = 0; by < p.r; ++by) {
      for (int64_t bx = 0; bx < p.s; ++bx) {
        for (int64_t d = 0; d < 4; ++d) {
          const int64_t r = 2 * by + d / 2 - 2 * p.pre[0] + pad_h;
          const int64_t q = 2 * bx + d % 2 - 2 * p.pre[1] + pad_w;
          if (r < 0 || r >= ws[2] || q < 0 || q >= ws[3]) continue;
          for (int64_t ci = 0; ci < channels; ++ci) {
            const size_t at =
                static_cast<size_t>(((k * p.r + by) * p.s + bx) * p.c + d * channels + ci);
            out[at] = static_cast<uint8_t>(w[((k * ws[1] + ci) * ws[2] + r) * ws[3] + q]);
          }
        }
      }
    }
  }
  return out;
}

// The problem of convolution `c` (input `x`, output `y`) on `stored_c` input channels: f16
// integers when `half`, space-to-depth (s2d_geometry) when `s2d`.
ConvProblem conv_problem(const IntConv& c, const Shape& x, const Shape& y, int64_t stored_c,
                         bool half, bool s2d) {
  const Shape w = c.w->shape();
  ConvProblem p;
  p.n = x[0];
  p.c = stored_c;
  p.h = x[2];
  p.w = x[3];
  p.k = w[0];
  p.r = w[2];
  p.s = w[3];
  p.oh = y[2];
  p.ow = y[3];
  p.pre = c.g.pad_begin;
  p.post = c.g.pad_end;
  p.strides = c.g.strides;
  p.dilations = c.g.dilations;
  p.half = half;
  if (s2d) {
    const S2d g = *s2d_geometry(c, x, y);
    p.h = x[2] / 2;
    p.w = x[3] / 2;
    p.r = g.taps[0];
    p.s = g.taps[1];
    p.pre = {g.pre[0], g.pre[1]};
    p.post = {g.post[0], g.post[1]};
    p.strides = {1, 1};
  }
  return p;
}

}  // namespace

namespace {

// A Relu on the convolution's 8-bit values (what qdq_fusion leaves of a ReLU before a symmetric
// int8 QuantizeLinear), when it is the output's only reader: it runs as the clamp at zero.
const Node* int_relu_reader(const Builder& b, const Node& conv) {
  const Node* r = sole_reader(b, conv.output(0));
  return r != nullptr && r->kind() == OpKind::kRelu && !b.is_fused(r) ? r : nullptr;
}

}  // namespace

Result<int> s2d_stem_config(Builder& b, const Node& conv, const Shape& x) {
  std::optional<IntConv> c = int_conv(conv);
  if (!c) return -1;
  const bool relu = int_relu_reader(b, conv) != nullptr;
  ConvProblem half = conv_problem(*c, x, conv.output(0)->tensor_type().shape(), 16, true, true);
  std::shared_ptr<ConvPlan> plan;  // cuDNN's f16 plan; none for a fused SiLU
  if (c->silu == 0.0f) {
    KILN_ASSIGN_OR_RETURN(plan, choose_half_plan(b, half, c->y, relu));
  }
  ConvProblem q = half;
  q.half = false;
  q.half_out = false;
  q.silu = c->silu;
  std::tie(q.lo, q.hi) = centered_bounds(c->y, relu);
  std::optional<Int8Gemm> gemm = gemm_problem(q);
  if (!gemm) return -1;
  return choose_stem(b, half, plan.get(), q, *gemm);
}

namespace {

// The residual Add a convolution's output feeds, when its other operand is computed already.
std::optional<IntAdd> fusable_add(const Builder& b, const Node& node) {
  const Node* dq = sole_reader(b, node.output(0));
  if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear) return std::nullopt;
  const Node* sum = sole_reader(b, dq->output(0));
  if (sum == nullptr) return std::nullopt;
  std::optional<IntAdd> a = int_add(b, *sum);
  if (!a) return std::nullopt;
  const int other = a->dq[0] == dq ? 1 : 0;
  if (!b.has_buffer(a->dq[other]->input(0))) return std::nullopt;
  // The convolution's output is the first operand.
  if (other == 0) {
    std::swap(a->dq[0], a->dq[1]);
    std::swap(a->in[0], a->in[1]);
  }
  return a;
}

}  // namespace

namespace {

// A depthwise QLinearConv on the own s8 kernel (launch_depthwise8), centered NHWC in and out, a
// Relu on its int8 values fused as the clamp at zero.
bool lower_depthwise_qconv(Builder& b, const Node& node, const IntConv& c) {
  const Value* xv = node.input(0);
  const Shape x = xv->tensor_type().shape();
  const Shape y = node.output(0)->tensor_type().shape();
  if (c.g.rank() != 2 || c.g.pad_begin[0] < 0 || c.g.pad_begin[1] < 0) return false;
  if (!b.buffer(b.stored_buffer(xv)).centered && (x[1] % 4 != 0 || !centerable(c.x))) {
    return false;
  }
  const int xi = centered_input(b, xv, c.x);
  const int64_t sc = b.buffer(xi).shape[1];  // stored channels
  if (sc % 4 != 0) return false;
  const Node* relu = c.silu > 0.0f ? nullptr : int_relu_reader(b, node);
  const int64_t kh = c.w->shape()[2];
  const int64_t kw = c.w->shape()[3];
  // The filter as [kh, kw, stored channels], the requantization per stored channel (0 past C).
  std::vector<uint8_t> w_bytes(static_cast<size_t>(kh * kw * sc), 0);
  std::vector<float> scale(static_cast<size_t>(sc), 0.0f);
  std::vector<float> bias(static_cast<size_t>(sc), 0.0f);
  const auto* w = c.w->data<int8_t>();
  for (int64_t ch = 0; ch < x[1]; ++ch) {
    for (int64_t t = 0; t < kh * kw; ++t) {
      w_bytes[static_cast<size_t>(t * sc + ch)] = static_cast<uint8_t>(w[ch * kh * kw + t]);
    }
    const double ws = c.w_scales[c.w_scales.size() == 1 ? 0 : static_cast<size_t>(ch)];
    const double s = static_cast<double>(c.x.scale) * ws / c.y.scale;
    scale[static_cast<size_t>(ch)] = static_cast<float>(s);
    if (c.bias != nullptr) {
      bias[static_cast<size_t>(ch)] =
          static_cast<float>(static_cast<double>(c.bias->data<int32_t>()[ch]) * s);
    }
  }
  const int wi = b.constant_bytes(DType::kI8, Shape{kh, kw, sc}, std::move(w_bytes));
  const int si = b.constant(std::move(scale));
  const int bi = b.constant(std::move(bias));
  const Value* yv = relu != nullptr ? relu->output(0) : node.output(0);
  const Out o = define_output(b, yv, sc);
  Depthwise8 p;
  p.n = x[0];
  p.h = x[2];
  p.width = x[3];
  p.c = sc;
  p.oh = y[2];
  p.ow = y[3];
  p.kh = static_cast<int>(kh);
  p.kw = static_cast<int>(kw);
  p.sh = static_cast<int>(c.g.strides[0]);
  p.sw = static_cast<int>(c.g.strides[1]);
  p.ph = static_cast<int>(c.g.pad_begin[0]);
  p.pw = static_cast<int>(c.g.pad_begin[1]);
  p.dh = static_cast<int>(c.g.dilations[0]);
  p.dw = static_cast<int>(c.g.dilations[1]);
  std::tie(p.lo, p.hi) = centered_bounds(c.y, relu != nullptr);
  p.silu = c.silu;
  const int yi = o.centered;
  add(b, node,
      relu != nullptr ? "QLinearConv+Relu depthwise int8"
      : c.silu > 0.0f ? "QLinearConv+SiLU depthwise int8"
                      : "QLinearConv depthwise int8",
      {xi, wi, si, bi}, {yi}, [=](Session& s) mutable {
        p.x = ptr(s, xi);
        p.w = ptr(s, wi);
        p.scale = static_cast<const float*>(ptr(s, si));
        p.bias = static_cast<const float*>(ptr(s, bi));
        p.y = ptr(s, yi);
        return launch_depthwise8(p, s.stream);
      });
  finish_output(b, o, yv, c.y);
  if (relu != nullptr) b.mark_fused(relu);
  return true;
}

}  // namespace

Result<bool> lower_qlinear_conv(Builder& b, const Node& node) {
  std::optional<IntConv> c = int_conv(node);
  if (!c) return false;
  if (c->group != 1) return lower_depthwise_qconv(b, node, *c);
  const Value* xv = node.input(0);
  const Shape x = xv->tensor_type().shape();
  const Shape y = node.output(0)->tensor_type().shape();
  const Shape w = c->w->shape();
  // An 8-bit input of other than whole groups of 4 channels that no QuantizeLinear here padded
  // (a graph input, a convolution's output of 31 channels): the node runs on the host kernels.
  if (!b.buffer(b.stored_buffer(xv)).centered && (x[1] % 4 != 0 || !centerable(c->x))) {
    return false;
  }
  const int xi = centered_input(b, xv, c->x);
  const int64_t stored_c = b.buffer(xi).shape[1];
  if (stored_c % 4 != 0) {
    return unavailable_error(fmt::format(
        "cuda target: {}: int8 convolutions need a multiple of 4 input channels (it has {}); "
        "quantize the input with a QuantizeLinear, which pads it",
        node.describe(), stored_c));
  }
  const bool s2d = is_s2d(b.buffer(xi), x);
  // stem_of's f16 input
  ConvProblem p = conv_problem(*c, x, y, stored_c, b.buffer(xi).dtype == DType::kF16, s2d);
  p.silu = c->silu;
  if (p.silu > 0.0f && p.half) {
    // stem_of gives a SiLU convolution's input s8 (the f16 engines are cuDNN's, without SiLU).
    return internal_error(
        fmt::format("cuda target: {}: a fused SiLU on an f16 input", node.describe()));
  }
  // The plan, with the residual Add fused when an engine takes it (s8 input), else alone; an f16
  // input's with an s8 output when an engine writes one, else f16 rounded by a step after. Not
  // after a fused SiLU (the own kernel applies one or the other).
  std::optional<IntAdd> sum = p.half || p.silu > 0.0f ? std::nullopt : fusable_add(b, node);
  // A Relu on the output's int8 values (never with a residual Add: the Add reads the output).
  const Node* relu = p.silu > 0.0f ? nullptr : int_relu_reader(b, node);
  std::shared_ptr<ConvPlan> plan;
  int gemm_config = -1;  // the own kernel's tile configuration, when it runs
  std::optional<Int8Gemm> gemm;
  if (p.half) {
    KILN_ASSIGN_OR_RETURN(plan, choose_half_plan(b, p, c->y, relu != nullptr));
  } else if (s2d) {
    // The s8 space-to-depth stem (lower_quantize wrote it so for the own kernel).
    std::tie(p.lo, p.hi) = centered_bounds(c->y, relu != nullptr);
    gemm = gemm_problem(p);
    KILN_ASSIGN_OR_RETURN(gemm_config, s2d_stem_config(b, node, x));
    if (!gemm) gemm_config = -1;
  } else {
    // The own kernel (every residual and clamp) or cuDNN, whichever is faster.
    p.residual = sum.has_value();
    if (sum) p.residual_scale = sum->in[1].scale / sum->out.scale;
    std::tie(p.lo, p.hi) = sum ? centered_bounds(sum->out, sum->relu != nullptr)
                               : centered_bounds(c->y, relu != nullptr);
    gemm = gemm_problem(p);
    if (gemm) {
      KILN_ASSIGN_OR_RETURN(KernelChoice choice, choose_kernel(b, p, *gemm));
      gemm_config = choice.config;
      plan = std::move(choice.plan);
    }
  }
  for (int fused = sum ? 1 : 0;
       !p.half && !s2d && p.silu == 0.0f && gemm_config < 0 && fused >= 0 && plan == nullptr;
       --fused) {
    p.residual = fused == 1;
    if (p.residual) p.residual_scale = sum->in[1].scale / sum->out.scale;
    std::tie(p.lo, p.hi) = p.residual ? centered_bounds(sum->out, sum->relu != nullptr)
                                      : centered_bounds(c->y, relu != nullptr);
    KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p));
    if (plan == nullptr && p.lo < 0) {
      // No engine takes a negative lower clip: the output's s8 saturation alone (values below
      // the zero point's floor then stay unclipped, closer to the float model than ONNX's).
      p.lo = -128;
      p.hi = 127;
      KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p));
    }
  }
  if (plan == nullptr && gemm_config < 0 && p.silu > 0.0f) {
    return internal_error(fmt::format(
        "cuda target: {}: the own int8 kernel does not take this convolution with its SiLU ({})",
        node.describe(), p.key()));
  }
  if (plan == nullptr && gemm_config < 0) {
    return unavailable_error(fmt::format(
        "cuda target: {}: cuDNN has no int8 engine for this convolution ({}); run it on the cpu "
        "target or as a float model",
        node.describe(), p.key()));
  }
  if (!p.residual) sum.reset();  // the Add runs on its own (lower_int_add)
  // Per channel: acc * x_scale * w_scale[k] / out_scale + bias[k] (in the same units), divided
  // by the residual's scale when fused.
  const float factor = sum ? sum->in[0].scale / sum->out.scale / p.residual_scale : 1.0f;
  std::vector<float> scale(static_cast<size_t>(p.k));
  std::vector<float> bias(static_cast<size_t>(p.k), 0.0f);
  for (int64_t k = 0; k < p.k; ++k) {
    const double ws = c->w_scales[c->w_scales.size() == 1 ? 0 : static_cast<size_t>(k)];
    const double s = static_cast<double>(c->x.scale) * ws / c->y.scale;
    scale[static_cast<size_t>(k)] = static_cast<float>(s * factor);
    if (c->bias != nullptr) {
      bias[static_cast<size_t>(k)] =
          static_cast<float>(static_cast<double>(c->bias->data<int32_t>()[k]) * s * factor);
    }
  }
  const QParams out = sum ? sum->out : c->y;
  const int zi = sum ? centered_input(b, sum->dq[1]->input(0), sum->in[1]) : -1;  // K % 4 == 0
  const int ri = sum && gemm_config < 0
                     ? b.constant(std::vector<float>(static_cast<size_t>(p.k), p.residual_scale))
                     : -1;
  if (plan != nullptr) b.need_workspace(plan->workspace);
  std::vector<uint8_t> w_bytes = s2d ? s2d_filter(*c, x[1], p) : nhwc_bytes(*c->w, p.c);
  if (p.half) {
    // The s8 filter as f16 integers (exact).
    std::vector<uint8_t> wide(w_bytes.size() * 2);
    for (size_t i = 0; i < w_bytes.size(); ++i) {
      const uint16_t h = Half(static_cast<float>(static_cast<int8_t>(w_bytes[i]))).bits;
      std::memcpy(wide.data() + 2 * i, &h, 2);
    }
    w_bytes = std::move(wide);
  }
  const int wi = b.constant_bytes(p.half ? DType::kF16 : DType::kI8, Shape{p.k, p.c, p.r, p.s},
                                  std::move(w_bytes));
  const int si = b.constant(std::move(scale));
  const int bi = b.constant(std::move(bias));
  const Value* yv = sum ? sum->q->output(0) : relu != nullptr ? relu->output(0) : node.output(0);
  const Out o = define_output(b, yv, p.k);
  // The convolution writes `o.centered`, or an f16 scratch buffer that a step rounds into it.
  int yi = o.centered;
  if (p.half_out) {
    Buffer buf;
    buf.dtype = DType::kF16;
    buf.shape = Shape{p.n, p.k, p.oh, p.ow};
    buf.nhwc = true;
    buf.bytes = p.y_bytes();
    yi = b.define_buffer(nullptr, std::move(buf));
  }
  std::vector<int> reads = {xi, wi, si, bi};
  if (zi >= 0) reads.push_back(zi);
  if (ri >= 0) reads.push_back(ri);
  std::string kind =
      sum      ? (sum->relu != nullptr ? "QLinearConv+Add+Relu int8" : "QLinearConv+Add int8")
      : p.half ? "QLinearConv f16 int8"
               : "QLinearConv int8";
  if (relu != nullptr) kind.insert(kind.find(" int8"), "+Relu");
  if (p.silu > 0.0f) kind.insert(kind.find(" int8"), "+SiLU");
  // The step's operands in this session's arena.
  auto args = [=](Session& s) {
    ConvArgs a;
    a.x = ptr(s, xi);
    a.w = ptr(s, wi);
    a.scale = ptr(s, si);
    a.bias = ptr(s, bi);
    a.z = zi >= 0 ? ptr(s, zi) : nullptr;
    a.y = ptr(s, yi);
    return a;
  };
  if (gemm_config >= 0) {
    kind = s2d ? (p.silu > 0.0f ? "QLinearConv+SiLU stem int8 gemm" : "QLinearConv stem int8 gemm")
               : kind + " gemm";
    const Int8Gemm g = *gemm;
    add(b, node, std::move(kind), reads, {yi},
        [=](Session& s) { return run_gemm(gemm_config, g, args(s), s.stream); });
  } else {
    add(b, node, std::move(kind), reads, {yi}, [=](Session& s) {
      ConvArgs a = args(s);
      a.rescale = ri >= 0 ? ptr(s, ri) : nullptr;
      a.workspace = s.workspace;
      KILN_RETURN_IF_ERROR(check_cudnn(cudnnSetStream(s.cudnn, s.stream), "cudnnSetStream"));
      return execute(s.cudnn, *plan, a);
    });
  }
  if (p.half_out) {
    const auto [lo, hi] = centered_bounds(c->y, relu != nullptr);
    Int8Layout l;
    l.n = p.n;
    l.c = p.k;
    l.s = p.oh * p.ow;
    l.stored_c = p.k;
    l.nhwc = true;
    const int from = yi;
    const int to = o.centered;
    add(b, node, "Round f16 int8", {from}, {to}, [=, lo = lo, hi = hi](Session& s) {
      return launch_quantize8(Elem::kF16, ptr(s, from), l, ptr(s, to), l, false, 1.0f, 0, lo, hi,
                              s.stream);
    });
  }
  finish_output(b, o, yv, out);
  if (relu != nullptr) b.mark_fused(relu);
  if (sum) {
    for (const Node* n : {sum->dq[0], sum->dq[1], sum->add, sum->relu, sum->q}) {
      if (n != nullptr) b.mark_fused(n);
    }
    b.mark_fused(sole_reader(b, node.output(0)));
  }
  return true;
}

bool int8_silu_conv(const Node& conv) {
  if (conv.kind() != OpKind::kConv || !conv.has_input(1) || !is_static4(conv.input(0)) ||
      !is_static4(conv.input(1)) || !is_static4(conv.output(0))) {
    return false;
  }
  const auto& op = conv.attrs<ops::Conv>();
  const Shape x = conv.input(0)->tensor_type().shape();
  const Shape w = conv.input(1)->tensor_type().shape();
  const Shape y = conv.output(0)->tensor_type().shape();
  const std::vector<int64_t> in_hw = {x[2], x[3]};
  Result<WindowGeometry> g =
      forward_window(in_hw, {w[2], w[3]}, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>{y[2], y[3]} || g->pad_begin[0] < 0 ||
      g->pad_begin[1] < 0) {
    return false;
  }
  // Depthwise: launch_depthwise8, whole groups of 4 channels.
  if (op.group != 1) return op.group == x[1] && op.group == w[0] && w[1] == 1 && x[1] % 4 == 0;
  // The own implicit GEMM (gemm_problem): input channels in multiples of 8, output ones of 16, or
  // an image's stride-2 stem run space-to-depth (stem_of, s2d_geometry) on 16 channels.
  const bool square = g->strides[0] == g->strides[1] && (g->strides[0] == 1 || g->strides[0] == 2);
  if (w[0] % 16 != 0 || g->dilations != std::vector<int64_t>{1, 1} || !square ||
      g->pad_begin[0] >= w[2] || g->pad_begin[1] >= w[3]) {
    return false;
  }
  if (x[1] % 8 == 0) return true;
  if (x[1] > 4 || g->strides[0] != 2 || x[2] % 2 != 0 || x[3] % 2 != 0) return false;
  return s2d_window(*g, w, x, y).has_value();
}

}  // namespace kiln::compiler::cuda
