// SPDX-License-Identifier: Apache-2.0
// Lowering Conv: on cuDNN (algorithm timed, bias and ReLU fused or in one kernel after it) or,
// where it is timed faster, the own tensor-core kernel (kernels/conv_mma.h), and depthwise ones on
// an own kernel (kernels/depthwise_conv.h).

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/autotune.h"
#include "compiler/targets/cuda/kernels/conv_mma.h"
#include "compiler/targets/cuda/kernels/depthwise_conv.h"
#include "compiler/targets/cuda/kernels/elementwise.h"
#include "compiler/targets/cuda/kernels/layout.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "compiler/targets/cuda/tuning.h"
#include "core/env.h"
#include "core/half.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

bool is_f32(const Value* v) {
  return v != nullptr && v->tensor_type().dtype == DType::kF32;
}

// An element type as kiln's and cuDNN's data types.
DType dtype_of(Elem e) {
  return e == Elem::kF32 ? DType::kF32 : e == Elem::kF16 ? DType::kF16 : DType::kBF16;
}
cudnnDataType_t cudnn_type(Elem e) {
  return e == Elem::kF32   ? CUDNN_DATA_FLOAT
         : e == Elem::kF16 ? CUDNN_DATA_HALF
                           : CUDNN_DATA_BFLOAT16;
}

struct ConvDescs {
  ConvDescs() = default;
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
  ~ConvDescs() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
    if (bias != nullptr) cudnnDestroyTensorDescriptor(bias);
    if (relu != nullptr) cudnnDestroyActivationDescriptor(relu);
  }
  cudnnTensorDescriptor_t x = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  // cudnnConvolutionBiasActivationForward: bias [1, K, 1, 1] in y's type, the activation.
  cudnnTensorDescriptor_t bias = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
};

constexpr size_t kMaxWorkspace = size_t{256} << 20;

// The fastest algorithm cudnnFind measures, within the workspace cap: for fp32 only FMA ones (no
// TF32), for f16/bf16 tensor-core ones too.
// A stored convolution choice: the algorithm and the math type it was measured with.
struct ConvChoice {
  int32_t algo = 0;
  int32_t math = 0;
};

// The bytes of a convolution's operands (scratch for timing).
struct ConvBytes {
  size_t x = 0, w = 0, y = 0;
};

// The index of the fastest of `candidates` (cuDNN's heuristic order) on scratch operands, on a
// stream of its own, timed by replay_ms; 0 when there is one candidate, no room for the scratch,
// or no candidate could be captured.
size_t fastest_conv(Builder& b, ConvDescs& d,
                    const std::vector<cudnnConvolutionFwdAlgoPerf_t>& candidates,
                    const ConvBytes& bytes, bool tensor_ops) {
  if (candidates.size() <= 1) return 0;
  size_t workspace_bytes = 0;
  for (const auto& c : candidates) workspace_bytes = std::max(workspace_bytes, c.memory);
  Scratch s;
  void* x = s.block(bytes.x);
  void* w = s.block(bytes.w);
  void* y = s.block(bytes.y);
  void* workspace = s.block(workspace_bytes);
  s.events.resize(2);
  if (x == nullptr || w == nullptr || y == nullptr || workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&s.events[0]) != cudaSuccess ||
      cudaEventCreate(&s.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cudnnHandle_t handle = b.cudnn();
  cudnnSetStream(handle, s.stream);
  size_t best = 0;
  float best_ms = INFINITY;
  const float one = 1.0f;
  const float zero = 0.0f;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    if (tensor_ops && cudnnSetConvolutionMathType(d.conv, c.mathType) != CUDNN_STATUS_SUCCESS) {
      continue;
    }
    auto once = [&] {
      return cudnnConvolutionForward(handle, &one, d.x, x, d.w, w, d.conv, c.algo, workspace,
                                     c.memory, &zero, d.y, y) == CUDNN_STATUS_SUCCESS;
    };
    const float ms = candidate_ms(s, once);
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  cudaStreamSynchronize(s.stream);
  cudnnSetStream(handle, nullptr);
  cudaGetLastError();
  return best;
}

// The algorithm for `key`: a choice known for this GPU (made earlier in this compile, or stored in
// the artifact being loaded) when cuDNN still takes it, else the fastest of cuDNN's heuristic
// candidates (fastest_conv).
Status choose_conv_algo(Builder& b, ConvDescs& d, bool tensor_ops, const std::string& key,
                        const ConvBytes& bytes) {
  cudnnHandle_t handle = b.cudnn();
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    std::optional<ConvChoice> c = choice_value<ConvChoice>(*known);
    size_t workspace = 0;
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(c ? c->algo : 0);
    const auto math = static_cast<cudnnMathType_t>(c ? c->math : 0);
    if (c && (tensor_ops || math != CUDNN_TENSOR_OP_MATH) &&
        (!tensor_ops || cudnnSetConvolutionMathType(d.conv, math) == CUDNN_STATUS_SUCCESS) &&
        cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, algo, &workspace) ==
            CUDNN_STATUS_SUCCESS &&
        workspace <= kMaxWorkspace) {
      d.algo = algo;
      d.workspace = workspace;
      b.record_choice(key, *known, false);
      return Status();
    }
  }
  // cuDNN's heuristic ranking, then each usable candidate timed here on the GPU (replay_ms).
  // cudnnFindConvolutionForwardAlgorithm, which times the calls as queued, picked FMA kernels 5-18
  // times slower than the tensor-core ones for batch 1 (ResNet-50 f16 NHWC on an H200: 2.7 ms a
  // run, against 0.36 ms with the heuristic's first choices).
  constexpr int kRequested = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  cudnnConvolutionFwdAlgoPerf_t perf[kRequested];
  int returned = 0;
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(
                                       handle, d.x, d.w, d.conv, d.y, kRequested, &returned, perf),
                                   "choosing a convolution algorithm"));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> usable;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    if (perf[i].mathType == CUDNN_TENSOR_OP_MATH && !tensor_ops) continue;
    usable.push_back(perf[i]);
  }
  if (usable.empty()) {
    return unavailable_error("cuda target: cuDNN offers no algorithm for this convolution");
  }
  const cudnnConvolutionFwdAlgoPerf_t& best = usable[fastest_conv(b, d, usable, bytes, tensor_ops)];
  d.algo = best.algo;
  d.workspace = best.memory;
  // f16/bf16 run with the math type the algorithm was measured with; fp32 keeps FMA (no TF32).
  if (tensor_ops) {
    KILN_RETURN_IF_ERROR(
        check_cudnn(cudnnSetConvolutionMathType(d.conv, best.mathType), "convolution math type"));
  }
  b.record_choice(key,
                  choice_bytes(ConvChoice{static_cast<int32_t>(best.algo),
                                          static_cast<int32_t>(best.mathType)}),
                  true);
  return Status();
}

// Tensor cores take NHWC f16/bf16 convolutions whose channels are a multiple of 8: an image's 3
// channels (ResNet's first convolution) are widened to 8 with zeros, in the input and the filter,
// instead of running cuDNN's FMA kernel (at batch 256 on an H200: 3.1 ms, against 1.5 ms padded
// with its bias and ReLU, and 0.45 ms for the padding step). 8 is the best width measured: widening
// to 4 or 16 instead made ResNet-50 at batch 256 take 10.26 or 8.06 ms against 7.38, MobileNetV2
// 4.91 or 5.16 against 4.84 ms (H200, cuDNN 9.19, 2026-11-22).
constexpr int64_t kChannelMultiple = 8;

// `v` rounded to f16 (or bf16 for any other `dtype`), as bits.
uint16_t half_bits(DType dtype, float v) {
  return dtype == DType::kF16 ? Half(v).bits : BFloat16(v).bits;
}

// ---- the own convolution kernel (kernels/conv_mma.h) ----

// A constant KCRS filter as launch_conv_mma reads it: [k, conv_mma_depth(p)] f16/bf16 bits, the
// reduction in the order of p's input layout (conv_mma.h), zeros past its end.
std::vector<uint8_t> conv_mma_filter(const std::vector<float>& kcrs, const ConvMma& p,
                                     DType dtype) {
  const int64_t kp = conv_mma_depth(p);
  const int64_t taps = p.kh * p.kw;
  std::vector<uint8_t> out(static_cast<size_t>(p.k * kp * 2), 0);
  for (int64_t o = 0; o < p.k; ++o) {
    for (int64_t ci = 0; ci < p.c; ++ci) {
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t r = p.x_nhwc ? tap * p.c + ci : ci * taps + tap;
        const uint16_t h = half_bits(dtype, kcrs[static_cast<size_t>((o * p.c + ci) * taps + tap)]);
        out[static_cast<size_t>(2 * (o * kp + r))] = static_cast<uint8_t>(h & 0xff);
        out[static_cast<size_t>(2 * (o * kp + r) + 1)] = static_cast<uint8_t>(h >> 8);
      }
    }
  }
  return out;
}

// What a convolution's cuDNN step runs besides the algorithm chosen for it: cuDNN's fused bias
// and activation call, or else the bias kernel after it (`epilogue`); a channel-padded copy of
// the input before it (`padded`: the channels, 0 for none).
struct CudnnStep {
  bool fused = false;
  bool epilogue = false;
  int64_t padded = 0;
};

// Whether the own kernel runs `p` faster than the cuDNN step for `d` as it would run (`step`),
// both timed as replayed graphs on scratch operands (candidate_ms), kept as a tuning choice.
// KILN_CUDA_CONV_MMA=0 never takes the own kernel, =1 always (where it is supported).
bool conv_mma_wins(Builder& b, ConvDescs& d, const ConvBytes& bytes, Elem e, const ConvMma& p,
                   const CudnnStep& step, const std::string& key) {
  if (const char* mode = env_flag_c_str(EnvFlag::kCudaConvMma); *mode != '\0') {
    return std::string_view(mode) != "0";
  }
  const std::string own_key =
      fmt::format("own {}{} lo{} hi{}{}{}", key, p.x_nhwc ? "" : " from nchw", p.lo, p.hi,
                  p.silu ? " silu" : "", step.fused ? " fused" : "");
  if (const std::vector<uint8_t>* known = b.known_choice(own_key)) {
    if (std::optional<int32_t> own = choice_value<int32_t>(*known)) {
      b.record_choice(own_key, *known, false);
      return *own != 0;
    }
  }
  const size_t filter = static_cast<size_t>(p.k * conv_mma_depth(p)) * 2;
  const int64_t pixels = p.n * p.oh * p.ow;
  Scratch s;
  void* x = s.block(bytes.x);
  void* image = step.padded > 0 ? nullptr : x;
  void* w = s.block(std::max(bytes.w, filter));
  void* y = s.block(bytes.y);
  void* bias = s.block(static_cast<size_t>(p.k) * sizeof(float));
  void* workspace = s.block(d.workspace);
  if (step.padded > 0) image = s.block(static_cast<size_t>(p.n * p.c * p.h * p.w) * 2);
  s.events.resize(2);
  if (x == nullptr || image == nullptr || w == nullptr || y == nullptr || bias == nullptr ||
      workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&s.events[0]) != cudaSuccess ||
      cudaEventCreate(&s.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudnnHandle_t handle = b.cudnn();
  cudnnSetStream(handle, s.stream);
  const float one = 1.0f;
  const float zero = 0.0f;
  const auto* f32_bias = static_cast<const float*>(bias);
  const float cudnn_ms = candidate_ms(s, [&] {
    if (step.padded > 0 &&
        !launch_pad_channels(e, image, x, p.n, p.c, p.h * p.w, step.padded, p.x_nhwc, s.stream)
             .ok()) {
      return false;
    }
    if (step.fused) {
      return cudnnConvolutionBiasActivationForward(handle, &one, d.x, x, d.w, w, d.conv, d.algo,
                                                   workspace, d.workspace, &zero, d.y, y, d.bias,
                                                   bias, d.relu, d.y, y) == CUDNN_STATUS_SUCCESS;
    }
    if (cudnnConvolutionForward(handle, &one, d.x, x, d.w, w, d.conv, d.algo, workspace,
                                d.workspace, &zero, d.y, y) != CUDNN_STATUS_SUCCESS) {
      return false;
    }
    return !step.epilogue ||
           launch_channel_affine(e, y, y, nullptr, f32_bias, nullptr, pixels * p.k, p.k, 1, p.lo,
                                 p.hi, s.stream, p.silu)
               .ok();
  });
  const float own_ms = candidate_ms(
      s, [&] { return launch_conv_mma(e, p, image, w, f32_bias, nullptr, y, s.stream).ok(); });
  cudaStreamSynchronize(s.stream);
  cudnnSetStream(handle, nullptr);
  cudaGetLastError();
  const bool wins = own_ms < cudnn_ms;
  log(LogLevel::kDebug, "cuda target: {}: own kernel {:.4f} ms, cuDNN step {:.4f} ms: {}", own_key,
      own_ms, cudnn_ms, wins ? "own kernel" : "cuDNN");
  b.record_choice(own_key, choice_bytes(int32_t{wins ? 1 : 0}), true);
  return wins;
}

// The constant bias buffer (in the output's type) for cudnnConvolutionBiasActivationForward with
// the clamp to [lo, hi] (ReLU: [0, inf), ReLU6: [0, 6], none: (-inf, inf)), or SiLU (swish, beta 1)
// when `silu`, when cuDNN runs it for
// `d` (tried once on scratch memory), else -1 (the bias kernel runs).
Result<int> fused_conv_bias(Builder& b, ConvDescs& d, cudnnDataType_t data, Elem e,
                            const std::vector<float>& bias, const Shape& x, const Shape& w,
                            const Shape& y, float lo, float hi, bool silu) {
  cudnnActivationMode_t mode;
  double coef = 0.0;
  if (silu) {
    if (lo != -INFINITY || hi != INFINITY) return -1;
    mode = CUDNN_ACTIVATION_SWISH;
  } else if (lo == 0.0f && hi == INFINITY) {
    mode = CUDNN_ACTIVATION_RELU;
  } else if (lo == 0.0f && std::isfinite(hi)) {
    mode = CUDNN_ACTIVATION_CLIPPED_RELU;
    coef = hi;
  } else if (lo == -INFINITY && hi == INFINITY) {
    mode = CUDNN_ACTIVATION_IDENTITY;
  } else {
    return -1;
  }
  const int k = static_cast<int>(w[0]);
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateTensorDescriptor(&d.bias), "bias descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW, data, 1, k, 1, 1), "bias descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateActivationDescriptor(&d.relu), "activation"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetActivationDescriptor(d.relu, mode, CUDNN_NOT_PROPAGATE_NAN, coef), "activation"));
  if (silu) {
    KILN_RETURN_IF_ERROR(
        check_cudnn(cudnnSetActivationDescriptorSwishBeta(d.relu, 1.0), "SiLU activation"));
  }
  std::vector<uint8_t> bytes;
  const DType dtype = dtype_of(e);
  for (float v : bias) {
    if (dtype == DType::kF32) {
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      bytes.insert(bytes.end(), p, p + 4);
    } else {
      const uint16_t h = half_bits(dtype, v);
      bytes.push_back(static_cast<uint8_t>(h & 0xff));
      bytes.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  // The trial: every operand on scratch memory, on a stream of its own.
  const size_t es = dtype_size(dtype);
  Scratch s;
  void* xs = s.block(static_cast<size_t>(x.numel()) * es);
  void* ws = s.block(static_cast<size_t>(w.numel()) * es);
  void* ys = s.block(static_cast<size_t>(y.numel()) * es);
  void* zs = s.block(static_cast<size_t>(y.numel()) * es);
  void* bs = s.block(bytes.size());
  void* workspace = s.block(d.workspace);
  if (xs == nullptr || ws == nullptr || ys == nullptr || zs == nullptr || bs == nullptr ||
      workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  const float one = 1.0f;
  cudnnSetStream(b.cudnn(), s.stream);
  const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
      b.cudnn(), &one, d.x, xs, d.w, ws, d.conv, d.algo, workspace, d.workspace, &one, d.y, zs,
      d.bias, bs, d.relu, d.y, ys);
  const cudaError_t synced = cudaStreamSynchronize(s.stream);
  cudnnSetStream(b.cudnn(), nullptr);
  cudaGetLastError();
  if (st != CUDNN_STATUS_SUCCESS || synced != cudaSuccess) return -1;
  return b.constant_bytes(dtype, Shape{w[0]}, std::move(bytes));
}

// The Mul of a SiLU that reads `v`, x * Sigmoid(x) (EfficientNet's activation): `v` read by
// exactly a Sigmoid and a Mul of `v` and that Sigmoid, which nothing else reads; else nullptr.
const Node* silu_of(const Builder& b, const Value* v) {
  if (v->uses().size() != 2 || b.only_consumer(v) != nullptr) return nullptr;
  for (const Value* out : b.graph().outputs()) {
    if (out == v) return nullptr;
  }
  const Node* sig = nullptr;
  const Node* mul = nullptr;
  for (const auto& use : v->uses()) {
    if (use.node->kind() == OpKind::kSigmoid) sig = use.node;
    if (use.node->kind() == OpKind::kMul) mul = use.node;
  }
  if (sig == nullptr || mul == nullptr || b.only_consumer(sig->output(0)) != mul ||
      mul->num_inputs() != 2) {
    return nullptr;
  }
  const bool operands = (mul->input(0) == v && mul->input(1) == sig->output(0)) ||
                        (mul->input(1) == v && mul->input(0) == sig->output(0));
  return operands && elem_of(mul->output(0)) == elem_of(v) ? mul : nullptr;
}

// The activation a convolution's output kernel applies: a clamp, [0, inf) for its own ReLU
// activation, or a Clip's constant bounds (ReLU6) when that Clip alone reads the output; or a SiLU
// (`silu`) that alone reads it. The Clip or the SiLU's Sigmoid and Mul are then fused (marked,
// named in `kind`) and the node whose output the step writes is returned, else `node`.
const Node* fuse_conv_clamp(Builder& b, const Node& node, std::string& kind, float& lo, float& hi,
                            bool& silu) {
  if (node.attrs<ops::Conv>().activation.has_value()) {
    lo = 0.0f;
    kind += "+Relu";
    return &node;
  }
  if (const Node* mul = silu_of(b, node.output(0))) {
    for (const auto& use : node.output(0)->uses()) b.mark_fused(use.node);
    silu = true;
    kind += "+SiLU";
    return mul;
  }
  const Node* clip = b.only_consumer(node.output(0));
  if (clip == nullptr || clip->kind() != OpKind::kClip) return &node;
  const auto u = unary_of(*clip);
  if (!u || u->first != Unary::kClip) return &node;
  lo = u->second.first;
  hi = u->second.second;
  b.mark_fused(clip);
  kind += "+Clip";
  return clip;
}

// Whether `node` is a depthwise Conv (group = input channels = output channels, a constant
// filter, a constant or f32 bias) that lower_depthwise runs on the own kernel.
bool depthwise_fits(const Node& node) {
  if (node.kind() != OpKind::kConv || node.num_inputs() < 2 || !node.has_input(0)) return false;
  const auto& op = node.attrs<ops::Conv>();
  if (op.activation && *op.activation != "Relu") return false;
  if (!common_elem({node.input(0), node.output(0)})) return false;
  const Shape x = shape_of(node.input(0));
  const Shape w = shape_of(node.input(1));
  const Shape y = shape_of(node.output(0));
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return false;
  const int64_t c = x[1];
  if (op.group != c || w[0] != c || w[1] != 1 || y[0] != x[0] || y[1] != c) return false;
  if (node.input(1)->constant_value() == nullptr || !elem_of(node.input(1))) return false;
  const std::vector<int64_t> in = {x[2], x[3]};
  Result<WindowGeometry> g =
      forward_window(in, {w[2], w[3]}, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>{y[2], y[3]}) return false;
  if (node.has_input(2)) {
    if (shape_of(node.input(2)) != Shape{c}) return false;
    if (!constant_floats(node.input(2)) && !is_f32(node.input(2))) return false;
  }
  return true;
}

Result<bool> lower_conv_as(Builder& b, const Node& node, bool nhwc) {
  const auto& op = node.attrs<ops::Conv>();
  if (op.activation && *op.activation != "Relu") return false;
  if (node.num_inputs() < 2) return false;
  const std::optional<Elem> e = common_elem({node.input(0), node.input(1), node.output(0)});
  if (!e) return false;
  const cudnnDataType_t data = cudnn_type(*e);
  const Shape x0 = shape_of(node.input(0));
  const Shape w0 = shape_of(node.input(1));
  const Shape y = shape_of(node.output(0));
  if (x0.rank() != 4 || w0.rank() != 4 || y.rank() != 4) return false;
  const int64_t groups = op.group;
  // The channels the convolution runs with: padded (see kChannelMultiple) for a constant filter.
  const bool pad = nhwc && *e != Elem::kF32 && groups == 1 && x0[1] % kChannelMultiple != 0 &&
                   node.input(1)->constant_value() != nullptr;
  const int64_t cp =
      pad ? (x0[1] + kChannelMultiple - 1) / kChannelMultiple * kChannelMultiple : x0[1];
  const Shape x{x0[0], cp, x0[2], x0[3]};
  const Shape w{w0[0], pad ? cp : w0[1], w0[2], w0[3]};
  if (groups < 1 || x[1] % groups != 0 || w[1] * groups != x[1] || w[0] % groups != 0) return false;
  const std::vector<int64_t> in = {x[2], x[3]};
  Result<WindowGeometry> g =
      forward_window(in, {w[2], w[3]}, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>{y[2], y[3]}) return false;
  if (g->pad_begin != g->pad_end) return false;  // cuDNN's legacy API pads symmetrically
  const bool has_bias = node.has_input(2);
  if (has_bias && shape_of(node.input(2)) != Shape{w[0]}) return false;
  // The bias kernel reads an f32 bias: an f32 tensor, or an f16/bf16 constant widened here.
  std::optional<std::vector<float>> wide_bias;
  if (has_bias && !is_f32(node.input(2))) {
    wide_bias = constant_floats(node.input(2));
    if (!wide_bias) return false;
  }
  const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  auto d = std::make_shared<ConvDescs>();
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateTensorDescriptor(&d->x), "descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateTensorDescriptor(&d->y), "descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateFilterDescriptor(&d->w), "descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreateConvolutionDescriptor(&d->conv), "descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetTensor4dDescriptor(d->x, format, data, i32(x[0]), i32(x[1]), i32(x[2]), i32(x[3])),
      "input descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetTensor4dDescriptor(d->y, format, data, i32(y[0]), i32(y[1]), i32(y[2]), i32(y[3])),
      "output descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetFilter4dDescriptor(d->w, data, format, i32(w[0]), i32(w[1]), i32(w[2]), i32(w[3])),
      "filter descriptor"));
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetConvolution2dDescriptor(d->conv, i32(g->pad_begin[0]), i32(g->pad_begin[1]),
                                      i32(g->strides[0]), i32(g->strides[1]), i32(g->dilations[0]),
                                      i32(g->dilations[1]), CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT),
      "convolution descriptor"));
  KILN_RETURN_IF_ERROR(
      check_cudnn(cudnnSetConvolutionGroupCount(d->conv, i32(groups)), "group count"));
  // fp32 means fp32: FMA math keeps TF32 tensor cores out. f16/bf16 run on tensor cores,
  // accumulating in f32 (the descriptor's compute type above).
  const bool tensor_ops = *e != Elem::kF32;
  KILN_RETURN_IF_ERROR(check_cudnn(
      cudnnSetConvolutionMathType(d->conv, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
      "math"));
  const std::string key =
      fmt::format("conv {} {} x{} w{} pads{},{} strides{},{} dilations{},{} groups{}",
                  dtype_name(node.input(0)->tensor_type().dtype), nhwc ? "nhwc" : "nchw",
                  x.to_string(), w.to_string(), g->pad_begin[0], g->pad_begin[1], g->strides[0],
                  g->strides[1], g->dilations[0], g->dilations[1], groups);
  const size_t es = dtype_size(dtype_of(*e));
  const ConvBytes bytes{static_cast<size_t>(x.numel()) * es, static_cast<size_t>(w.numel()) * es,
                        static_cast<size_t>(y.numel()) * es};
  KILN_RETURN_IF_ERROR(
      choose_conv_algo(b, *d, tensor_ops, key, bytes).with_context(node.describe()));
  b.need_workspace(d->workspace);
  float lo = -INFINITY;
  float hi = INFINITY;
  std::string kind = has_bias ? "Conv+Bias" : "Conv";
  bool silu = false;
  const Node* last = fuse_conv_clamp(b, node, kind, lo, hi, silu);
  // A ReLU6 that only a depthwise convolution on the own kernel reads: that kernel applies the
  // upper bound as it reads its input (DepthwiseConv::in_hi), so this epilogue is a plain ReLU,
  // which cuDNN fuses; it has no clipped ReLU there, and MobileNetV2's expansions and stem each
  // took a separate bias pass after cuDNN (1.2 ms of 4.9 at batch 256 on an H200).
  if (last != &node && last->kind() == OpKind::kClip && lo == 0.0f && !silu) {
    const Node* reader = b.only_consumer(last->output(0));
    if (reader != nullptr && reader->input(0) == last->output(0) && depthwise_fits(*reader)) {
      hi = INFINITY;
    }
  }
  // A residual Add that alone reads the result (and a ReLU that alone reads the Add) runs in the
  // bias kernel, when the Add's other operand is already computed: Conv+Bias+Add+Relu, ResNet's
  // block end, in one pass over the output.
  int zi = -1;
  if (last == &node && !op.activation.has_value()) {
    const Node* sum = b.only_consumer(node.output(0));
    if (sum != nullptr && sum->kind() == OpKind::kAdd && sum->num_inputs() == 2) {
      const Value* other = sum->input(0) == node.output(0) ? sum->input(1) : sum->input(0);
      if (other != node.output(0) && shape_of(other) == y && elem_of(other) == e &&
          shape_of(sum->output(0)) == y && b.has_buffer(other)) {
        zi = nhwc ? b.buffer_nhwc(other) : b.buffer_of(other);
        last = sum;
        b.mark_fused(sum);
        kind += "+Add";
        if (const Node* relu = b.only_consumer(sum->output(0));
            relu != nullptr && relu->kind() == OpKind::kRelu) {
          last = relu;
          b.mark_fused(relu);
          lo = 0.0f;
          kind += "+Relu";
        }
      }
    }
  }
  const bool clamp = last != &node || op.activation.has_value();
  // Bias, residual and ReLU inside cuDNN's epilogue (one pass less over the output), where cuDNN
  // runs this configuration: a trial call at compile time decides.
  int fused_bias = -1;
  // ReLU6 and no activation (cuDNN's clipped ReLU and identity) only for dense convolutions:
  // MobileNetV2 at batch 256 ran 3 times slower on an H200 with its depthwise ones fused that way
  // (one of two changes measured together; the other, the algorithm choice, is kept).
  // SiLU as cuDNN's swish (beta 1) where the trial shows cuDNN takes it, else in the bias kernel.
  // KILN_CUDA_FUSED_BIAS=0 keeps every epilogue in the bias kernel (to compare the two on a GPU).
  static const bool cudnn_epilogues = [] {
    const char* v = env_flag_c_str(EnvFlag::kCudaFusedBias);
    return v == nullptr || std::string_view(v) != "0";
  }();
  if (cudnn_epilogues && has_bias && (groups == 1 || (lo == 0.0f && hi == INFINITY && !silu))) {
    if (std::optional<std::vector<float>> bias = constant_floats(node.input(2))) {
      KILN_ASSIGN_OR_RETURN(fused_bias,
                            fused_conv_bias(b, *d, data, *e, *bias, x, w, y, lo, hi, silu));
    }
  }
  // The own tensor-core kernel where it runs the convolution faster than cuDNN's step as it would
  // run (conv_mma_wins): an image's few channels read in the layout they have (no padded copy),
  // 1x1 convolutions of few channels.
  std::optional<ConvMma> own;
  std::optional<std::vector<float>> filter;
  if (nhwc && tensor_ops && groups == 1 && (filter = constant_floats(node.input(1)))) {
    ConvMma p;
    p.x_nhwc = !pad || b.is_nhwc(node.input(0));
    p.n = x0[0], p.c = x0[1], p.h = x0[2], p.w = x0[3], p.k = y[1], p.oh = y[2], p.ow = y[3];
    p.kh = w0[2], p.kw = w0[3], p.sh = g->strides[0], p.sw = g->strides[1];
    p.ph = g->pad_begin[0], p.pw = g->pad_begin[1], p.dh = g->dilations[0], p.dw = g->dilations[1];
    p.lo = lo, p.hi = hi, p.silu = silu;
    const CudnnStep step{fused_bias >= 0, has_bias || clamp, pad ? cp : 0};
    if (conv_mma_supported(p) && conv_mma_wins(b, *d, bytes, *e, p, step, key)) own = p;
  }
  int xi = -1;
  if (own && pad) {
    xi = b.stored_buffer(node.input(0));
  } else if (pad) {
    // One step widens the input (either layout) into a padded NHWC copy.
    const int from = b.stored_buffer(node.input(0));
    const bool from_nhwc = b.is_nhwc(node.input(0));
    xi = b.scratch(dtype_of(*e), x, true);
    const int64_t hw = x0[2] * x0[3];
    add(b, node, "Pad channels", {from}, {xi}, [=, e = *e](Session& s) {
      return launch_pad_channels(e, ptr(s, from), ptr(s, xi), x0[0], x0[1], hw, cp, from_nhwc,
                                 s.stream);
    });
  } else {
    xi = nhwc ? b.buffer_nhwc(node.input(0)) : b.buffer_of(node.input(0));
  }
  int wi = -1;
  if (own) {
    wi = b.constant_bytes(dtype_of(*e), Shape{own->k, conv_mma_depth(*own)},
                          conv_mma_filter(*filter, *own, dtype_of(*e)));
  } else if (!nhwc) {
    wi = b.buffer_of(node.input(1));
  } else if (const Tensor* wt = node.input(1)->constant_value(); wt != nullptr) {
    wi = b.constant_bytes(wt->dtype(), w, nhwc_bytes(*wt, w[1]));
  } else {
    wi = b.buffer_nhwc(node.input(1));
  }
  const int bi = !has_bias   ? -1
                 : wide_bias ? b.constant(std::move(*wide_bias))
                             : b.buffer_of(node.input(2));
  const int yi = b.define(last->output(0), nhwc);
  const int64_t n = y.numel();
  const int64_t channels = y[1];
  const int64_t inner = nhwc ? 1 : y[2] * y[3];  // channel of element i: (i / inner) % channels
  std::vector<int> reads = {xi, wi};
  if (bi >= 0) reads.push_back(bi);
  if (zi >= 0) reads.push_back(zi);
  if (fused_bias >= 0 && !own) reads.push_back(fused_bias);
  if (own) {
    kind.insert(4, "Mma");  // "ConvMma+Bias+Clip": the own kernel's steps in profiles
    add(b, node, kind, reads, {yi}, [=, p = *own, e = *e](Session& s) {
      return launch_conv_mma(e, p, ptr(s, xi), ptr(s, wi), bi >= 0 ? f32(s, bi) : nullptr,
                             zi >= 0 ? ptr(s, zi) : nullptr, ptr(s, yi), s.stream);
    });
    return true;
  }
  add(b, node, kind, reads, {yi}, [=, e = *e](Session& s) -> Status {
    const float one = 1.0f;
    const float zero = 0.0f;
    if (fused_bias >= 0) {
      return check_cudnn(
          cudnnConvolutionBiasActivationForward(
              s.cudnn, &one, d->x, ptr(s, xi), d->w, ptr(s, wi), d->conv, d->algo, s.workspace,
              d->workspace, zi >= 0 ? &one : &zero, d->y, zi >= 0 ? ptr(s, zi) : ptr(s, yi),
              d->bias, ptr(s, fused_bias), d->relu, d->y, ptr(s, yi)),
          "convolution with bias and activation");
    }
    KILN_RETURN_IF_ERROR(check_cudnn(
        cudnnConvolutionForward(s.cudnn, &one, d->x, ptr(s, xi), d->w, ptr(s, wi), d->conv, d->algo,
                                s.workspace, d->workspace, &zero, d->y, ptr(s, yi)),
        "convolution"));
    if (!has_bias && !clamp) return Status();
    return launch_channel_affine(e, ptr(s, yi), ptr(s, yi), nullptr, bi >= 0 ? f32(s, bi) : nullptr,
                                 zi >= 0 ? ptr(s, zi) : nullptr, n, channels, inner, lo, hi,
                                 s.stream, silu);
  });
  return true;
}

// A depthwise Conv (group = input channels = output channels, a constant filter) on the own
// kernel, in the layout of the convolutions around it (NHWC for f16/bf16), with its bias and a
// ReLU or constant Clip in the same pass. cuDNN's grouped kernel for it ran NCHW only, between two
// reorders and before a bias pass: MobileNetV2 fp16 at batch 256 took 32 ms on an H200 that way.
// False (nothing added) for any other convolution.
bool lower_depthwise(Builder& b, const Node& node, bool nhwc) {
  if (!depthwise_fits(node)) return false;
  const auto& op = node.attrs<ops::Conv>();
  const Elem e = *common_elem({node.input(0), node.output(0)});
  const Shape x = shape_of(node.input(0));
  const Shape w = shape_of(node.input(1));
  const Shape y = shape_of(node.output(0));
  const int64_t c = x[1];
  const std::vector<float> filter = *constant_floats(node.input(1));
  const std::vector<int64_t> in = {x[2], x[3]};
  const WindowGeometry g =
      *forward_window(in, {w[2], w[3]}, {op.auto_pad, op.strides, op.dilations, op.pads});
  const bool has_bias = node.has_input(2);
  std::optional<std::vector<float>> bias;
  if (has_bias) bias = constant_floats(node.input(2));
  // The filter [C, 1, kh, kw] as f32 [kh * kw, C]: a thread's channels are contiguous per tap.
  const int64_t taps = w[2] * w[3];
  std::vector<float> weight(static_cast<size_t>(c * taps));
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t t = 0; t < taps; ++t) {
      weight[static_cast<size_t>(t * c + ch)] = filter[static_cast<size_t>(ch * taps + t)];
    }
  }
  DepthwiseConv p;
  set_window(p, x, y, g);
  p.nhwc = nhwc;
  // A constant Clip before it is applied again at its upper bound as the input is read: a no-op,
  // unless the convolution writing the input left that bound to this read (lower_conv_as).
  if (const Node* clip = node.input(0)->producer();
      clip != nullptr && clip->kind() == OpKind::kClip) {
    if (const auto u = unary_of(*clip); u && u->first == Unary::kClip) p.in_hi = u->second.second;
  }
  const int xi = nhwc ? b.buffer_nhwc(node.input(0)) : b.buffer_of(node.input(0));
  const int wi = b.constant(std::move(weight));
  const int bi = !has_bias ? -1 : bias ? b.constant(std::move(*bias)) : b.buffer_of(node.input(2));
  std::string kind = has_bias ? "DepthwiseConv+Bias" : "DepthwiseConv";
  const Node* last = fuse_conv_clamp(b, node, kind, p.lo, p.hi, p.silu);
  const int yi = b.define(last->output(0), nhwc);
  std::vector<int> reads = {xi, wi};
  if (bi >= 0) reads.push_back(bi);
  add(b, node, kind, reads, {yi}, [=](Session& s) {
    return launch_depthwise_conv(e, p, ptr(s, xi), f32(s, wi), bi >= 0 ? f32(s, bi) : nullptr,
                                 ptr(s, yi), s.stream);
  });
  return true;
}

}  // namespace

// NHWC (channels last) where tensor cores want it (KILN_CUDA_LAYOUT): input, filter (KRSC) and
// output; the filter is reordered once at compile time when it is a constant. A convolution cuDNN
// has no NHWC algorithm for runs NCHW.
Result<bool> lower_conv(Builder& b, const Node& node) {
  if (!node.has_input(0)) return false;
  const bool nhwc = Builder::nhwc_convolutions(node.input(0)->tensor_type().dtype);
  if (lower_depthwise(b, node, nhwc)) return true;
  Result<bool> lowered = lower_conv_as(b, node, nhwc);
  if (!lowered.ok() && nhwc) return lower_conv_as(b, node, false);
  return lowered;
}

}  // namespace kiln::compiler::cuda
