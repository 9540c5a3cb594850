// SPDX-License-Identifier: Apache-2.0
// Lowering nodes to device steps: Conv on cuDNN (algorithm timed, bias and ReLU fused or in one
// kernel after it) or, where it is timed faster, the own tensor-core kernel (conv_mma.h), and
// depthwise ones on an own kernel; MatMul/Gemm on cuBLASLt (bias/ReLU
// epilogues), own kernels for the elementwise ops, pooling, softmax, BatchNorm, Concat and
// Transpose; reshapes share buffers.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/conv_mma.h"
#include "compiler/targets/cuda/kernels.h"
#include "compiler/targets/cuda/program.h"
#include "compiler/targets/cuda/views.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

float* f32(Session& s, int id) {
  return static_cast<float*>(s.device[static_cast<size_t>(id)]);
}

void* ptr(Session& s, int id) {
  return s.device[static_cast<size_t>(id)];
}

bool is_f32(const Value* v) {
  return v != nullptr && v->tensor_type().dtype == DType::kF32;
}

// The window of a 2-D pooling or depthwise convolution: x [N, C, H, W] to y's spatial dims through
// `g` (a 2-D geometry).
void set_window(Window2d& p, const Shape& x, const Shape& y, const WindowGeometry& g) {
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.oh = y[2];
  p.ow = y[3];
  p.kh = g.kernel[0];
  p.kw = g.kernel[1];
  p.sh = g.strides[0];
  p.sw = g.strides[1];
  p.ph = g.pad_begin[0];
  p.pw = g.pad_begin[1];
  p.dh = g.dilations[0];
  p.dw = g.dilations[1];
}

}  // namespace

// The kernels' element type of a float tensor (f32, f16, bf16).
std::optional<Elem> elem_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return Elem::kF32;
    case DType::kF16: return Elem::kF16;
    case DType::kBF16: return Elem::kBF16;
    default: return std::nullopt;
  }
}

std::optional<Elem> elem_of(const Value* v) {
  if (v == nullptr) return std::nullopt;
  return elem_of(v->tensor_type().dtype);
}

namespace {

// An element type as kiln's, cuDNN's and cuBLAS's data types.
DType dtype_of(Elem e) {
  return e == Elem::kF32 ? DType::kF32 : e == Elem::kF16 ? DType::kF16 : DType::kBF16;
}
cudnnDataType_t cudnn_type(Elem e) {
  return e == Elem::kF32   ? CUDNN_DATA_FLOAT
         : e == Elem::kF16 ? CUDNN_DATA_HALF
                           : CUDNN_DATA_BFLOAT16;
}
cudaDataType_t blas_type(Elem e) {
  return e == Elem::kF32 ? CUDA_R_32F : e == Elem::kF16 ? CUDA_R_16F : CUDA_R_16BF;
}

// The element type shared by every given value, when it is a float type.
std::optional<Elem> common_elem(std::initializer_list<const Value*> values) {
  std::optional<Elem> e;
  for (const Value* v : values) {
    std::optional<Elem> ev = elem_of(v);
    if (!ev || (e && *e != *ev)) return std::nullopt;
    e = ev;
  }
  return e;
}

}  // namespace

// A float constant's values as f32 (f16/bf16 widened), if `v` is one.
std::optional<std::vector<float>> constant_floats(const Value* v) {
  const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
  if (t == nullptr || !elem_of(t->dtype())) return std::nullopt;
  std::vector<float> out(static_cast<size_t>(t->numel()));
  visit_dtype(t->dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t->data<T>()[i]);
    }
  });
  return out;
}

namespace {

Shape shape_of(const Value* v) {
  return v->tensor_type().shape();
}

// The scalar held by a constant float input (f32, or f16/bf16 as the fp16/bf16 conversion leaves
// a Clip's bounds), as f32, if it is one.
std::optional<float> constant_scalar(const Node& node, int i) {
  if (!node.has_input(i)) return std::nullopt;
  std::optional<std::vector<float>> v = constant_floats(node.input(i));
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

void add(Builder& b, const Node& node, std::string kind, std::vector<int> in, std::vector<int> out,
         FunctionStep::Fn fn) {
  b.add_step(std::make_unique<FunctionStep>(node, std::move(kind), std::move(in), std::move(out),
                                            std::move(fn)));
}

// The node of `kind` that alone reads `v`, else nullptr.
const Node* consumer_as(const Builder& b, const Value* v, OpKind kind) {
  const Node* n = b.only_consumer(v);
  return n != nullptr && n->kind() == kind ? n : nullptr;
}

// The operand of binary `node` that is not `v`, when the other one is `v`.
const Value* other_operand(const Node& node, const Value* v) {
  if (node.num_inputs() != 2) return nullptr;
  if (node.input(0) == v) return node.input(1);
  if (node.input(1) == v) return node.input(0);
  return nullptr;
}

// ---- shapes only ----

bool lower_alias(Builder& b, const Node& node) {
  if (node.num_outputs() != 1 || !node.has_input(0)) return false;
  if (node.input(0)->tensor_type().dtype != node.output(0)->tensor_type().dtype) return false;
  b.alias(node.output(0), node.input(0));
  return true;
}

// ---- elementwise ----

}  // namespace

std::optional<std::pair<Unary, std::pair<float, float>>> unary_of(const Node& node) {
  auto plain = [](Unary u) { return std::make_pair(u, std::make_pair(0.0f, 0.0f)); };
  switch (node.kind()) {
    case OpKind::kRelu: return plain(Unary::kRelu);
    case OpKind::kSigmoid: return plain(Unary::kSigmoid);
    case OpKind::kTanh: return plain(Unary::kTanh);
    case OpKind::kExp: return plain(Unary::kExp);
    case OpKind::kLog: return plain(Unary::kLog);
    case OpKind::kNeg: return plain(Unary::kNeg);
    case OpKind::kAbs: return plain(Unary::kAbs);
    case OpKind::kSqrt: return plain(Unary::kSqrt);
    case OpKind::kErf: return plain(Unary::kErf);
    case OpKind::kReciprocal: return plain(Unary::kReciprocal);
    case OpKind::kFloor: return plain(Unary::kFloor);
    case OpKind::kCeil: return plain(Unary::kCeil);
    case OpKind::kSin: return plain(Unary::kSin);
    case OpKind::kCos: return plain(Unary::kCos);
    case OpKind::kSoftplus: return plain(Unary::kSoftplus);
    case OpKind::kHardSwish: return plain(Unary::kHardSwish);
    case OpKind::kGelu:
      return plain(node.attrs<ops::Gelu>().approximate == "tanh" ? Unary::kGeluTanh : Unary::kGelu);
    case OpKind::kSwish:
      return std::make_pair(Unary::kSwish, std::make_pair(node.attrs<ops::Swish>().alpha, 0.0f));
    case OpKind::kLeakyRelu:
      return std::make_pair(Unary::kLeakyRelu,
                            std::make_pair(node.attrs<ops::LeakyRelu>().alpha, 0.0f));
    case OpKind::kElu:
      return std::make_pair(Unary::kElu, std::make_pair(node.attrs<ops::Elu>().alpha, 0.0f));
    case OpKind::kHardSigmoid: {
      const auto& op = node.attrs<ops::HardSigmoid>();
      return std::make_pair(Unary::kHardSigmoid, std::make_pair(op.alpha, op.beta));
    }
    case OpKind::kClip: {
      const float lo = node.has_input(1) ? constant_scalar(node, 1).value_or(NAN) : -INFINITY;
      const float hi = node.has_input(2) ? constant_scalar(node, 2).value_or(NAN) : INFINITY;
      if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
      return std::make_pair(Unary::kClip, std::make_pair(lo, hi));
    }
    default: return std::nullopt;
  }
}

namespace {

// Unary `u` from value `in` to value `out` as one step of `node` named `kind`.
bool add_unary(Builder& b, const Node& node, std::string kind,
               std::pair<Unary, std::pair<float, float>> u, const Value* in, const Value* out) {
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  // Elementwise: the output keeps the input's layout.
  const int x = b.stored_buffer(in);
  const int y = b.define(out, b.is_nhwc(in));
  const int64_t n = shape_of(out).numel();
  const Unary op = u.first;
  const float alpha = u.second.first;
  const float beta = u.second.second;
  add(b, node, std::move(kind), {x}, {y}, [=, e = *e](Session& s) {
    return launch_unary(e, op, ptr(s, x), ptr(s, y), n, alpha, beta, s.stream);
  });
  return true;
}

// `node` (a unary op) reading `in` and writing `out` (its own input and output, or the ends of a
// Cast pair around it).
bool lower_unary(Builder& b, const Node& node, const Value* in, const Value* out) {
  auto u = unary_of(node);
  return u && add_unary(b, node, std::string(node.op().name()), *u, in, out);
}

// Squeeze-and-excitation's scaling, Mul(x [N, C, H, W], s [N, C, 1, 1]) in either order: the
// index of x among the Mul's inputs, or -1.
int channel_scale_operand(const Node& mul) {
  if (mul.kind() != OpKind::kMul || mul.num_inputs() != 2) return -1;
  const Shape y = shape_of(mul.output(0));
  if (y.rank() != 4) return -1;
  for (int i = 0; i < 2; ++i) {
    const Shape s = shape_of(mul.input(1 - i));
    if (shape_of(mul.input(i)) == y && s == Shape{y[0], y[1], 1, 1} && y[2] * y[3] > 1) return i;
  }
  return -1;
}

// The scaling of channel_scale_operand's Mul as one step, in x's layout: y = x * s per (image,
// channel), `scale` (the [N, C, 1, 1] operand) through a sigmoid when `sigmoid` (its Sigmoid
// fused).
bool lower_channel_scale(Builder& b, const Node& mul, const Value* scale, bool sigmoid) {
  const int xi = channel_scale_operand(mul);
  if (xi < 0) return false;
  const Value* x = mul.input(xi);
  const std::optional<Elem> e = common_elem({x, scale, mul.output(0)});
  if (!e || !b.has_buffer(x)) return false;
  const Shape y = shape_of(mul.output(0));
  const bool nhwc = b.is_nhwc(x);
  const int a = b.stored_buffer(x);
  const int si = b.stored_buffer(scale);  // [N, C, 1, 1]: the same bytes in either layout
  const int yi = b.define(mul.output(0), nhwc);
  const int64_t hw = y[2] * y[3];
  add(b, mul, sigmoid ? "Sigmoid+ChannelScale" : "ChannelScale", {a, si}, {yi},
      [=, e = *e](Session& s) {
        return launch_channel_scale(e, ptr(s, a), ptr(s, si), ptr(s, yi), y[0], y[1], hw, nhwc,
                                    sigmoid, s.stream);
      });
  return true;
}

bool lower_unary(Builder& b, const Node& node) {
  // A Sigmoid that alone feeds squeeze-and-excitation's scaling runs inside it.
  if (const Node* mul = b.only_consumer(node.output(0));
      node.kind() == OpKind::kSigmoid && mul != nullptr && channel_scale_operand(*mul) >= 0 &&
      mul->input(1 - channel_scale_operand(*mul)) == node.output(0) &&
      lower_channel_scale(b, *mul, node.input(0), true)) {
    b.mark_fused(mul);
    return true;
  }
  return lower_unary(b, node, node.input(0), node.output(0));
}

}  // namespace

std::optional<Binary> binary_of(OpKind kind) {
  switch (kind) {
    case OpKind::kAdd: return Binary::kAdd;
    case OpKind::kSub: return Binary::kSub;
    case OpKind::kMul: return Binary::kMul;
    case OpKind::kDiv: return Binary::kDiv;
    case OpKind::kPow: return Binary::kPow;
    case OpKind::kMax: return Binary::kMax;
    case OpKind::kMin: return Binary::kMin;
    default: return std::nullopt;
  }
}

void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const int offset = out.rank() - in.rank();
  int64_t stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int i = d - offset;
    if (i < 0) {
      strides[d] = 0;
      continue;
    }
    strides[d] = in[i] == 1 && out[d] != 1 ? 0 : stride;
    stride *= in[i];
  }
}

namespace {

// Strides per logical output dim of an operand of shape `in`: its plain row-major layout
// (broadcast_strides), or NHWC storage (a 4-D operand: n HWC, c 1, h WC, w C), 0 where it
// broadcasts.
void operand_strides(const Shape& in, const Shape& out, bool nhwc, int64_t* strides) {
  if (!nhwc) {
    broadcast_strides(in, out, strides);
    return;
  }
  const int64_t stored[4] = {in[2] * in[3] * in[1], 1, in[3] * in[1], in[1]};
  for (int d = 0; d < 4; ++d) strides[d] = in[d] == 1 && out[d] != 1 ? 0 : stored[d];
}

// x * c, c * x or x / c with c a constant scalar (attention's scaling of q and k): one contiguous
// pass of the unary kernel instead of the broadcasting one.
bool lower_scaling(Builder& b, const Node& node) {
  if ((node.kind() != OpKind::kMul && node.kind() != OpKind::kDiv) || node.num_inputs() != 2) {
    return false;
  }
  for (int c : {1, 0}) {
    if (c == 0 && node.kind() == OpKind::kDiv) break;
    const Value* x = node.input(1 - c);
    std::optional<std::vector<float>> k = constant_floats(node.input(c));
    if (!k || k->size() != 1 || shape_of(x) != shape_of(node.output(0))) continue;
    const float factor = node.kind() == OpKind::kMul ? (*k)[0] : 1.0f / (*k)[0];
    return add_unary(b, node, std::string(node.op().name()), {Unary::kScale, {factor, 0.0f}}, x,
                     node.output(0));
  }
  return false;
}

bool lower_binary(Builder& b, const Node& node) {
  if (const int xi = channel_scale_operand(node);
      xi >= 0 && lower_channel_scale(b, node, node.input(1 - xi), false)) {
    return true;
  }
  auto op = binary_of(node.kind());
  if (!op || node.num_inputs() != 2) return false;
  if (lower_scaling(b, node)) return true;
  const std::optional<Elem> e = common_elem({node.input(0), node.input(1), node.output(0)});
  if (!e) return false;
  const Shape out = shape_of(node.output(0));
  const Shape sa = shape_of(node.input(0));
  const Shape sb = shape_of(node.input(1));
  if (out.rank() > kMaxRank || sa.rank() > out.rank() || sb.rank() > out.rank()) return false;
  // A 4-D result is stored NHWC when an operand is: each operand is read through its own layout's
  // strides, permuted to the output's NHWC order.
  const bool nhwc = out.rank() == 4 && (b.is_nhwc(node.input(0)) || b.is_nhwc(node.input(1)));
  const bool a_nhwc = nhwc && b.is_nhwc(node.input(0));  // else read plain (reordered if needed)
  const bool b_nhwc = nhwc && b.is_nhwc(node.input(1));
  BroadcastIndex index;
  index.rank = out.rank();
  int64_t la[kMaxRank];
  int64_t lb[kMaxRank];
  operand_strides(sa, out, a_nhwc, la);
  operand_strides(sb, out, b_nhwc, lb);
  static constexpr int kNhwc[4] = {0, 2, 3, 1};
  for (int d = 0; d < out.rank(); ++d) {
    const int from = nhwc ? kNhwc[d] : d;
    index.out_dims[d] = out[from];
    index.a_strides[d] = la[from];
    index.b_strides[d] = lb[from];
  }
  const bool contiguous = sa == out && sb == out && a_nhwc == nhwc && b_nhwc == nhwc;
  const int a = nhwc ? b.stored_buffer(node.input(0)) : b.buffer_of(node.input(0));
  const int c = nhwc ? b.stored_buffer(node.input(1)) : b.buffer_of(node.input(1));
  // A ReLU that alone reads the result runs inside the same kernel (the residual Add+Relu).
  const Node* relu = b.only_consumer(node.output(0));
  if (relu != nullptr && relu->kind() != OpKind::kRelu) relu = nullptr;
  if (relu != nullptr) b.mark_fused(relu);
  const int y = b.define((relu != nullptr ? relu : &node)->output(0), nhwc);
  const int64_t n = out.numel();
  const Binary kind = *op;
  const bool fused = relu != nullptr;
  add(b, node, std::string(node.op().name()) + (fused ? "+Relu" : ""), {a, c}, {y},
      [=, e = *e](Session& s) {
        return launch_binary(e, kind, ptr(s, a), ptr(s, c), ptr(s, y), n, index, contiguous, fused,
                             s.stream);
      });
  return true;
}

// Device memory freed on scope exit (tuning's scratch).
struct Scratch {
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* p : blocks) cudaFree(p);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  // `bytes` of device memory filled with a small non-zero pattern (0x3c in every byte: about
  // 0.0115 in f32, 1.06 in f16, 0.0115 in bf16), or nullptr when the GPU has too little free.
  void* block(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    blocks.push_back(p);
    cudaMemset(p, 0x3c, bytes);
    return p;
  }
  std::vector<void*> blocks;
  std::vector<cudaEvent_t> events;
  cudaStream_t stream = nullptr;
};

// ---- cuDNN convolution ----

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

// Milliseconds of one replay of a CUDA graph of what `queue` queues on `s.stream` (after a warm-up
// replay), or infinity when it cannot be captured or run: GPU time only, as when the program
// replays its own graph. (Timing the calls as queued measured cuDNN's host overhead at batch 1:
// ResNet-50 f16 on an H200 then got FMA kernels 5-18 times slower on the GPU, 2.3 ms a run
// against 0.36 ms.)
template <class Queue>
float replay_ms(Scratch& s, Queue&& queue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  float ms = INFINITY;
  std::shared_lock capturing(capture_mutex());
  if (cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    const bool queued = queue();
    const bool captured = cudaStreamEndCapture(s.stream, &graph) == cudaSuccess && queued;
    float t = 0;
    if (captured && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
        cudaGraphLaunch(exec, s.stream) == cudaSuccess &&
        cudaEventRecord(s.events[0], s.stream) == cudaSuccess &&
        cudaGraphLaunch(exec, s.stream) == cudaSuccess &&
        cudaEventRecord(s.events[1], s.stream) == cudaSuccess &&
        cudaEventSynchronize(s.events[1]) == cudaSuccess &&
        cudaEventElapsedTime(&t, s.events[0], s.events[1]) == cudaSuccess) {
      ms = t;
    }
  }
  capturing.unlock();
  cudaStreamSynchronize(s.stream);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  return ms;
}

// The GPU time of a candidate: one trial call of `once` (a library call queued on `s.stream` that
// says whether it was accepted), then three calls replayed as a graph; infinity when the trial
// fails.
template <class Call>
float candidate_ms(Scratch& s, const Call& once) {
  if (!once() || cudaStreamSynchronize(s.stream) != cudaSuccess) {
    cudaGetLastError();
    return INFINITY;
  }
  return replay_ms(s, [&] {
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) ok = once();
    return ok;
  });
}

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

// ---- the own convolution kernel (conv_mma.h) ----

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

// ---- cuBLASLt matmul ----

struct LtPlan {
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t l : {a, b, d}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
  }
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLAS's A: our B
  cublasLtMatrixLayout_t b = nullptr;  // cuBLAS's B: our A
  cublasLtMatrixLayout_t d = nullptr;  // C and D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // The heuristic's first algorithm, run instead when the tuned one is refused at run time.
  bool has_fallback = false;
  cublasLtMatmulAlgo_t fallback{};
  size_t fallback_workspace = 0;
  std::atomic<bool> use_fallback{false};
  // The bias pointer is an attribute of the shared descriptor: set and used under this lock.
  std::mutex mutex;
};

constexpr size_t kLtWorkspace = size_t{32} << 20;

Status make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                   int64_t ld, int64_t batch, int64_t stride) {
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld),
                   "matrix layout"));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    KILN_RETURN_IF_ERROR(
        check_cublas(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)),
                     "batch count"));
    KILN_RETURN_IF_ERROR(check_cublas(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &stride, sizeof(stride)),
        "batch stride"));
  }
  return Status();
}

// A stored matmul choice: cuBLASLt's algorithm (opaque, valid for the same library and GPU).
struct MatmulChoice {
  cublasLtMatmulAlgo_t algo;
};

// The index of the fastest of cuBLASLt's `count` heuristic candidates, each timed over 3 runs
// after one warm-up on scratch operands; 0 (the heuristic's first) when there is one candidate or
// no room for the scratch. The descriptor's bias pointer is set to scratch only when the epilogue
// reads a bias (`bias_bytes` > 0), and is null again on return: cuBLASLt refuses a matmul whose
// descriptor carries a bias pointer its epilogue does not read (CUBLAS_STATUS_INVALID_VALUE), and
// the scratch is freed here.
int fastest_matmul(cublasLtHandle_t lt, const LtPlan& p, const cublasLtMatmulHeuristicResult_t* r,
                   int count, size_t a_bytes, size_t b_bytes, size_t d_bytes, size_t bias_bytes,
                   float alpha, float beta) {
  if (count <= 1) return 0;
  Scratch s;
  void* a = s.block(a_bytes);
  void* bm = s.block(b_bytes);
  void* d = s.block(d_bytes);
  void* bias = bias_bytes > 0 ? s.block(bias_bytes) : nullptr;
  void* workspace = s.block(kLtWorkspace);
  s.events.resize(2);
  if (a == nullptr || bm == nullptr || d == nullptr || (bias_bytes > 0 && bias == nullptr) ||
      workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&s.events[0]) != cudaSuccess ||
      cudaEventCreate(&s.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (bias != nullptr) {
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  int best = 0;
  float best_ms = INFINITY;
  for (int i = 0; i < count; ++i) {
    if (r[i].workspaceSize > kLtWorkspace) continue;
    auto once = [&] {
      return cublasLtMatmul(lt, p.op, &alpha, bm, p.a, a, p.b, &beta, d, p.d, d, p.d, &r[i].algo,
                            workspace, r[i].workspaceSize, s.stream) == CUBLAS_STATUS_SUCCESS;
    };
    const float ms = candidate_ms(s, once);
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  cudaStreamSynchronize(s.stream);
  cudaGetLastError();
  if (bias != nullptr) {
    const void* none = nullptr;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none, sizeof(none));
  }
  return best;
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

std::optional<std::vector<const Node*>> gelu_reading(const Builder& b, const Value* x);

// Row-major Y[M,N] = A[M,K] B[K,N] runs as column-major Y^T = B^T A^T: cuBLAS's A is our B.
Result<bool> lower_matmul(Builder& b, const Node& node) {
  if (node.num_inputs() < 2) return false;
  // f16/bf16 operands and result, f32 accumulation and scaling (alpha, beta); bias in the result's
  // type.
  const std::optional<Elem> e = common_elem({node.input(0), node.input(1), node.output(0)});
  if (!e) return false;
  const cudaDataType_t type = blas_type(*e);
  const Shape sa = shape_of(node.input(0));
  const Shape sb = shape_of(node.input(1));
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t m = 0, k = 0, n = 0, batch = 1;
  int c_buffer = -1;
  bool bias = false;
  if (node.kind() == OpKind::kGemm) {
    const auto& op = node.attrs<ops::Gemm>();
    if (sa.rank() != 2 || sb.rank() != 2) return false;
    trans_a = op.transA != 0;
    trans_b = op.transB != 0;
    alpha = op.alpha;
    m = trans_a ? sa[1] : sa[0];
    k = trans_a ? sa[0] : sa[1];
    n = trans_b ? sb[0] : sb[1];
    if (node.has_input(2)) {
      if (elem_of(node.input(2)) != e) return false;
      const Shape sc = shape_of(node.input(2));
      if ((sc == Shape{n} || sc == Shape{1, n}) && op.beta == 1.0f) {
        bias = true;
      } else if (sc == Shape{m, n}) {
        beta = op.beta;
      } else {
        return false;
      }
      c_buffer = b.buffer_of(node.input(2));
    }
  } else {
    if (sa.rank() < 2 || sb.rank() < 2) return false;
    k = sa[sa.rank() - 1];
    n = sb[sb.rank() - 1];
    if (sb.rank() == 2) {
      m = sa.numel() / k;  // leading dims fold into M
    } else {
      if (sa.rank() != sb.rank()) return false;
      for (int d = 0; d + 2 < sa.rank(); ++d) {
        if (sa[d] != sb[d]) return false;
        batch *= sa[d];
      }
      m = sa[sa.rank() - 2];
    }
  }
  if (m == 0 || n == 0 || k == 0) return false;
  // A MatMul's bias Add (a constant [n] of the result's type: a Linear layer's), or its scaling
  // by a constant (attention's 1/sqrt(d)), runs in the matmul.
  const Node* tail = &node;
  if (node.kind() == OpKind::kMatMul) {
    if (const Node* add = consumer_as(b, node.output(0), OpKind::kAdd)) {
      const Value* v = other_operand(*add, node.output(0));
      if (batch == 1 && v != nullptr && v->constant_value() != nullptr && elem_of(v) == e &&
          shape_of(v) == Shape{n}) {
        bias = true;
        // Its Constant node may come after the MatMul: a buffer of its own bytes.
        const Tensor* t = v->constant_value();
        const auto* raw = static_cast<const uint8_t*>(t->raw_data());
        c_buffer = b.has_buffer(v) ? b.buffer_of(v)
                                   : b.constant_bytes(t->dtype(), t->shape(),
                                                      std::vector<uint8_t>(raw, raw + t->nbytes()));
        tail = add;
      }
    }
    const Node* scale = b.only_consumer(node.output(0));
    if (!bias && scale != nullptr &&
        (scale->kind() == OpKind::kMul || scale->kind() == OpKind::kDiv) &&
        scale->input(0) == node.output(0) && elem_of(scale->output(0)) == e) {
      std::optional<std::vector<float>> c = constant_floats(scale->input(1));
      if (c && c->size() == 1 && (*c)[0] != 0.0f) {
        alpha = scale->kind() == OpKind::kMul ? (*c)[0] : 1.0f / (*c)[0];
        tail = scale;
      }
    }
  }
  // A residual Add of a value already computed, of the result's shape (a transformer block's
  // x + Linear(...)), runs as cuBLASLt's C with beta 1: no separate pass over three tensors.
  const Node* residual_add = nullptr;
  int residual = -1;
  if (node.kind() == OpKind::kMatMul && alpha == 1.0f && beta == 0.0f) {
    if (const Node* add = consumer_as(b, tail->output(0), OpKind::kAdd)) {
      const Value* r = other_operand(*add, tail->output(0));
      if (r != nullptr && r != tail->output(0) && b.has_buffer(r) && elem_of(r) == e &&
          shape_of(r) == shape_of(tail->output(0)) &&
          shape_of(add->output(0)) == shape_of(tail->output(0))) {
        residual_add = add;
        residual = b.buffer_of(r);
        beta = 1.0f;
      }
    }
  }
  const Node* end = residual_add != nullptr ? residual_add : tail;
  // A following ReLU runs as the epilogue, but not after a residual (the epilogue's order of the
  // ReLU and C is not relied on).
  const Node* relu = residual_add != nullptr ? nullptr : b.only_consumer(end->output(0));
  if (relu != nullptr && relu->kind() != OpKind::kRelu) relu = nullptr;
  // A GELU after the bias (a transformer's MLP) runs as the epilogue too, in f16/bf16.
  std::optional<std::vector<const Node*>> gelu;
  if (bias && relu == nullptr && residual_add == nullptr) gelu = gelu_reading(b, end->output(0));
  auto p = std::make_shared<LtPlan>();
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul"));
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(check_cublas(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      "transa"));
  KILN_RETURN_IF_ERROR(check_cublas(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      "transb"));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (bias)
    epilogue = relu != nullptr ? CUBLASLT_EPILOGUE_RELU_BIAS
               : gelu          ? CUBLASLT_EPILOGUE_GELU_BIAS
                               : CUBLASLT_EPILOGUE_BIAS;
  else if (relu != nullptr)
    epilogue = CUBLASLT_EPILOGUE_RELU;
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                  sizeof(epilogue)),
                   "epilogue"));
  KILN_RETURN_IF_ERROR(trans_b ? make_layout(&p->a, type, k, n, k, batch, k * n)
                               : make_layout(&p->a, type, n, k, n, batch, k * n));
  KILN_RETURN_IF_ERROR(trans_a ? make_layout(&p->b, type, m, k, m, batch, m * k)
                               : make_layout(&p->b, type, k, m, k, batch, m * k));
  KILN_RETURN_IF_ERROR(make_layout(&p->d, type, n, m, n, batch, m * n));
  cublasLtMatmulPreference_t pref = nullptr;
  KILN_RETURN_IF_ERROR(check_cublas(cublasLtMatmulPreferenceCreate(&pref), "preference"));
  const uint64_t cap = kLtWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap,
                                       sizeof(cap));
  // A choice known for this GPU when cuBLASLt still takes it; else the fastest of its heuristic's
  // first 8 candidates.
  const size_t es = dtype_size(node.input(0)->tensor_type().dtype);
  const std::string key =
      fmt::format("matmul {} m{} n{} k{} batch{} ta{} tb{} epilogue{} beta{}",
                  dtype_name(node.input(0)->tensor_type().dtype), m, n, k, batch, trans_a, trans_b,
                  static_cast<int>(epilogue), beta != 0.0f);
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(b.lt(), p->op, p->a, p->b, p->d, p->d, pref, kCandidates,
                                     results, &found) != CUBLAS_STATUS_SUCCESS) {
    found = 0;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  bool chosen = false;
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    std::optional<MatmulChoice> c = choice_value<MatmulChoice>(*known);
    cublasLtMatmulHeuristicResult_t check{};
    if (c &&
        cublasLtMatmulAlgoCheck(b.lt(), p->op, p->a, p->b, p->d, p->d, &c->algo, &check) ==
            CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= kLtWorkspace) {
      p->algo = c->algo;
      p->workspace = check.workspaceSize;
      b.record_choice(key, *known, false);
      chosen = true;
    }
  }
  if (!chosen) {
    if (found == 0) return false;  // the host runs it
    const auto bytes = [&](int64_t elements) { return static_cast<size_t>(elements) * es; };
    const int best =
        fastest_matmul(b.lt(), *p, results, found, bytes(batch * m * k), bytes(batch * k * n),
                       bytes(batch * m * n), bias ? bytes(n) : 0, alpha, beta);
    p->algo = results[best].algo;
    p->workspace = results[best].workspaceSize;
    b.record_choice(key, choice_bytes(MatmulChoice{p->algo}), true);
  }
  if (found > 0 && !same_algo(p->algo, results[0].algo)) {
    p->has_fallback = true;
    p->fallback = results[0].algo;
    p->fallback_workspace = results[0].workspaceSize;
  }
  b.need_workspace(std::max(p->workspace, p->fallback_workspace));
  const int ai = b.buffer_of(node.input(0));
  const int bi = b.buffer_of(node.input(1));
  const Node* last = relu != nullptr ? relu : gelu ? gelu->back() : end;
  if (gelu) {
    for (const Node* n : *gelu) b.mark_fused(n);
  }
  if (tail != &node) b.mark_fused(tail);
  if (residual_add != nullptr) b.mark_fused(residual_add);
  if (relu != nullptr) b.mark_fused(relu);
  const int yi = b.define(last->output(0));
  std::vector<int> reads = {ai, bi};
  if (c_buffer >= 0) reads.push_back(c_buffer);
  if (residual >= 0) reads.push_back(residual);
  std::string kind = std::string(node.op().name()) + (bias ? "+Bias" : "") +
                     (alpha != 1.0f ? "+Scale" : "") + (residual >= 0 ? "+Residual" : "") +
                     (relu != nullptr ? "+Relu" : "") + (gelu ? "+Gelu" : "");
  add(b, node, kind, reads, {yi}, [=](Session& s) -> Status {
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (bias) {
      lock.lock();
      const void* ptr = s.device[static_cast<size_t>(c_buffer)];
      KILN_RETURN_IF_ERROR(
          check_cublas(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &ptr, sizeof(ptr)),
                       "bias pointer"));
    }
    const void* c = residual >= 0  ? ptr(s, residual)
                    : beta != 0.0f ? s.device[static_cast<size_t>(c_buffer)]
                                   : ptr(s, yi);
    const auto matmul = [&](bool fallback) {
      return cublasLtMatmul(s.lt, p->op, &alpha, ptr(s, bi), p->a, ptr(s, ai), p->b, &beta, c, p->d,
                            ptr(s, yi), p->d, fallback ? &p->fallback : &p->algo, s.workspace,
                            fallback ? p->fallback_workspace : p->workspace, s.stream);
    };
    const bool fallback = p->use_fallback.load(std::memory_order_relaxed);
    cublasStatus_t status = matmul(fallback);
    if (!fallback && p->has_fallback &&
        (status == CUBLAS_STATUS_INVALID_VALUE || status == CUBLAS_STATUS_NOT_SUPPORTED)) {
      // The tuned algorithm (measured, or taken from an artifact) is refused: cuBLASLt's own first
      // choice for these descriptors runs from now on.
      p->use_fallback.store(true, std::memory_order_relaxed);
      static std::once_flag logged;
      std::call_once(logged, [&] {
        log(LogLevel::kWarning,
            "cuda target: cuBLASLt refused a tuned matmul algorithm (status {}); that matmul runs "
            "cuBLASLt's heuristic first choice instead (reported once per process)",
            static_cast<int>(status));
      });
      status = matmul(true);
    }
    return check_cublas(status, "matmul");
  });
  return true;
}

// ---- pooling, softmax, normalization, data movement ----

bool lower_pool(Builder& b, const Node& node) {
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (node.num_outputs() != 1 || !e) return false;
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  if (x.rank() != 4) return false;
  Pool2d p;
  p.max = node.kind() == OpKind::kMaxPool;
  std::optional<std::vector<int64_t>> no_dilations;
  Result<WindowGeometry> g = invalid_argument_error("");
  const std::vector<int64_t> in = {x[2], x[3]};
  if (p.max) {
    const auto& op = node.attrs<ops::MaxPool>();
    if (!op.kernel_shape) return false;
    g = forward_window(in, *op.kernel_shape,
                       {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0});
  } else {
    const auto& op = node.attrs<ops::AveragePool>();
    if (!op.kernel_shape || has_dilation(op.dilations)) return false;
    p.count_include_pad = op.count_include_pad != 0;
    if (p.count_include_pad && op.ceil_mode != 0) return false;
    g = forward_window(in, *op.kernel_shape,
                       {op.auto_pad, op.strides, no_dilations, op.pads, op.ceil_mode != 0});
  }
  if (!g.ok() || g->rank() != 2 || g->out != std::vector<int64_t>{y[2], y[3]}) return false;
  set_window(p, x, y, *g);
  p.nhwc = b.is_nhwc(node.input(0));  // pools keep their input's layout
  const int xi = b.stored_buffer(node.input(0));
  const int yi = b.define(node.output(0), p.nhwc);
  add(b, node, std::string(node.op().name()), {xi}, {yi},
      [=, e = *e](Session& s) { return launch_pool2d(e, p, ptr(s, xi), ptr(s, yi), s.stream); });
  return true;
}

bool lower_global_pool(Builder& b, const Node& node) {
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (!e) return false;
  const Shape x = shape_of(node.input(0));
  if (x.rank() < 3) return false;
  const int64_t outer = x[0] * x[1];
  const int64_t inner = x.numel() / std::max<int64_t>(outer, 1);
  if (inner == 0) return false;
  const bool max = node.kind() == OpKind::kGlobalMaxPool;
  // An NHWC input is reduced in place of reordering it; the [N, C, 1, 1] result is the same
  // either way.
  const bool nhwc = b.is_nhwc(node.input(0));
  const int xi = nhwc ? b.stored_buffer(node.input(0)) : b.buffer_of(node.input(0));
  const int yi = b.define(node.output(0));
  const int64_t batch = x[0];
  const int64_t channels = x[1];
  add(b, node, std::string(node.op().name()), {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_global_pool(e, ptr(s, xi), ptr(s, yi), batch, channels, inner, nhwc, max,
                              s.stream);
  });
  return true;
}

bool lower_softmax(Builder& b, const Node& node, const Value* in, const Value* out) {
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  const Shape x = shape_of(in);
  const bool log = node.kind() == OpKind::kLogSoftmax;
  int64_t axis = log ? node.attrs<ops::LogSoftmax>().axis : node.attrs<ops::Softmax>().axis;
  if (axis < 0) axis += x.rank();
  if (x.rank() == 0 || axis != x.rank() - 1) return false;
  const int64_t cols = x[x.rank() - 1];
  if (cols == 0) return false;
  const int64_t rows = x.numel() / cols;
  const int xi = b.buffer_of(in);
  const int yi = b.define(out);
  add(b, node, std::string(node.op().name()), {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_softmax(e, ptr(s, xi), ptr(s, yi), rows, cols, log, s.stream);
  });
  return true;
}
bool lower_softmax(Builder& b, const Node& node) {
  return lower_softmax(b, node, node.input(0), node.output(0));
}

bool lower_batchnorm(Builder& b, const Node& node) {
  const auto& op = node.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0 || node.num_outputs() != 1 || node.num_inputs() != 5) return false;
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (!e) return false;
  const Shape x = shape_of(node.input(0));
  if (x.rank() < 2) return false;
  const int64_t c = x[1];
  std::vector<float> t[4];  // scale, B, mean, var: constants of any float type
  for (int i = 0; i < 4; ++i) {
    std::optional<std::vector<float>> v = constant_floats(node.input(i + 1));
    if (!v || static_cast<int64_t>(v->size()) != c) return false;
    t[i] = std::move(*v);
  }
  std::vector<float> scale(static_cast<size_t>(c));
  std::vector<float> shift(static_cast<size_t>(c));
  for (size_t i = 0; i < scale.size(); ++i) {
    const float s = t[0][i] / std::sqrt(t[3][i] + op.epsilon);
    scale[i] = s;
    shift[i] = t[1][i] - t[2][i] * s;
  }
  const int si = b.constant(std::move(scale));
  const int hi = b.constant(std::move(shift));
  const bool nhwc = b.is_nhwc(node.input(0));  // keeps its input's layout
  const int xi = b.stored_buffer(node.input(0));
  const int yi = b.define(node.output(0), nhwc);
  const int64_t n = x.numel();
  const int64_t inner = nhwc ? 1 : c == 0 ? 0 : n / (x[0] * c);
  add(b, node, "BatchNormalization", {xi, si, hi}, {yi}, [=, e = *e](Session& s) {
    return launch_channel_affine(e, ptr(s, xi), ptr(s, yi), f32(s, si), f32(s, hi), nullptr, n, c,
                                 inner, -INFINITY, INFINITY, s.stream);
  });
  return true;
}

bool lower_concat(Builder& b, const Node& node) {
  const Shape y = shape_of(node.output(0));
  int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += y.rank();
  if (axis < 0 || axis >= y.rank()) return false;
  const DType dtype = node.output(0)->tensor_type().dtype;
  const size_t es = dtype_size(dtype);
  // Channels of NHWC inputs concatenate NHWC: one row per pixel (N*H*W rows of C_i each).
  bool nhwc = false;
  if (y.rank() == 4 && axis == 1) {
    for (const Value* v : node.inputs()) nhwc = nhwc || (v != nullptr && b.is_nhwc(v));
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= y[d];
  if (nhwc) outer = y[0] * y[2] * y[3];
  const size_t out_row = static_cast<size_t>(y.numel() / std::max<int64_t>(outer, 1)) * es;
  struct Part {
    int buffer;
    size_t row;     // bytes of one outer row of the input
    size_t offset;  // where its rows start in an output row
  };
  std::vector<Part> parts;
  std::vector<int> reads;
  size_t at = 0;
  for (const Value* v : node.inputs()) {
    if (v == nullptr || v->tensor_type().dtype != dtype) return false;
    const Shape s = shape_of(v);
    const size_t row = static_cast<size_t>(s.numel() / std::max<int64_t>(outer, 1)) * es;
    parts.push_back({nhwc ? b.buffer_nhwc(v) : b.buffer_of(v), row, at});
    reads.push_back(parts.back().buffer);
    at += row;
  }
  if (at != out_row || outer == 0) return false;
  const int yi = b.define(node.output(0), nhwc);
  add(b, node, "Concat", reads, {yi}, [=](Session& s) -> Status {
    auto* dst = static_cast<uint8_t*>(s.device[static_cast<size_t>(yi)]);
    for (const Part& p : parts) {
      if (p.row == 0) continue;
      KILN_RETURN_IF_ERROR(check_cuda(
          cudaMemcpy2DAsync(dst + p.offset, out_row, s.device[static_cast<size_t>(p.buffer)], p.row,
                            p.row, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s.stream),
          "concat copy"));
    }
    return Status();
  });
  return true;
}

bool lower_transpose(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  const int rank = x.rank();
  if (rank > kMaxRank || rank == 0) return false;
  const size_t es = dtype_size(node.input(0)->tensor_type().dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int>(perm.size()) != rank) return false;
  std::vector<int64_t> in_strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = stride;
    stride *= x[d];
  }
  std::vector<int64_t> out_dims(static_cast<size_t>(rank));
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    out_dims[static_cast<size_t>(d)] = y[d];
    strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  }
  const int xi = b.buffer_of(node.input(0));
  const int yi = b.define(node.output(0));
  const int64_t n = y.numel();
  add(b, node, "Transpose", {xi}, {yi}, [=](Session& s) {
    return launch_permute(s.device[static_cast<size_t>(xi)], s.device[static_cast<size_t>(yi)], n,
                          rank, out_dims.data(), strides.data(), static_cast<int>(es), s.stream);
  });
  return true;
}

// ---- views: Slice, Split, Gather (one index), Expand as strided copies ----

}  // namespace

// A constant integer tensor's values (i32 or i64), if `v` is one.
std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == DType::kI64) {
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(t->data<int64_t>()[i]);
  } else if (t->dtype() == DType::kI32) {
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(t->data<int32_t>()[i]);
  } else {
    return std::nullopt;
  }
  return out;
}

namespace {

// Row-major element strides of `s`.
std::vector<int64_t> plain_strides(const Shape& s) {
  std::vector<int64_t> strides(static_cast<size_t>(s.rank()));
  int64_t stride = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = stride;
    stride *= s[d];
  }
  return strides;
}

// One strided read of a source buffer: output dims, the source's stride per output dim and the
// element offset of the first element.
struct View {
  int to = -1;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

bool is_reshape(OpKind kind) {
  return kind == OpKind::kReshape || kind == OpKind::kFlatten || kind == OpKind::kSqueeze ||
         kind == OpKind::kUnsqueeze || kind == OpKind::kIdentity;
}

// The value view `v` of a copy step writes: `out` itself, or the output of a Transpose that reads
// `out` through reshapes, each the only reader of the one before (attention's heads: Split, Slice
// or Gather of the QKV projection, Reshape to heads, Transpose), with `v` reshaped and permuted to
// match: one strided copy instead of two. The reshapes and the Transpose are marked fused.
const Value* fold_transpose(Builder& b, const Value* out, View& v) {
  StridedView sv{v.dims, v.strides, v.offset};
  std::vector<const Node*> chain;
  const Value* at = out;
  for (const Node* n = b.only_consumer(at); n != nullptr; n = b.only_consumer(at)) {
    if (n->num_outputs() != 1 || n->input(0) != at) break;
    if (is_reshape(n->kind())) {
      std::optional<StridedView> r = reshape_view(sv, shape_of(n->output(0)).dims());
      if (!r) break;
      sv = std::move(*r);
      chain.push_back(n);
      at = n->output(0);
      continue;
    }
    if (n->kind() != OpKind::kTranspose) break;
    std::vector<int64_t> perm = n->attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
    if (perm.empty()) {
      for (int64_t d = static_cast<int64_t>(sv.dims.size()) - 1; d >= 0; --d) perm.push_back(d);
    }
    if (perm.size() != sv.dims.size() || perm.size() > static_cast<size_t>(kMaxRank)) break;
    sv = permute_view(sv, perm);
    chain.push_back(n);
    for (const Node* c : chain) b.mark_fused(c);
    v.dims = std::move(sv.dims);
    v.strides = std::move(sv.strides);
    v.offset = sv.offset;
    return n->output(0);
  }
  return out;
}

// A step writing each view of buffer `from` (elements of `es` bytes) into its own buffer.
bool add_views(Builder& b, const Node& node, int from, size_t es, std::vector<View> views) {
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  std::vector<int> writes;
  for (const View& v : views) {
    if (v.dims.size() > static_cast<size_t>(kMaxRank)) return false;
    writes.push_back(v.to);
  }
  add(b, node, std::string(node.op().name()), {from}, writes, [=](Session& s) -> Status {
    for (const View& v : views) {
      int64_t n = 1;
      for (int64_t d : v.dims) n *= d;
      const auto* base =
          static_cast<const uint8_t*>(ptr(s, from)) + v.offset * static_cast<int64_t>(es);
      KILN_RETURN_IF_ERROR(launch_permute(base, ptr(s, v.to), n, static_cast<int>(v.dims.size()),
                                          v.dims.data(), v.strides.data(), static_cast<int>(es),
                                          s.stream));
    }
    return Status();
  });
  return true;
}

bool lower_slice(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  auto starts = constant_ints(node.input(1));
  auto ends = constant_ints(node.input(2));
  if (!starts || !ends || starts->size() != ends->size() || x.rank() != y.rank()) return false;
  std::vector<int64_t> axes;
  if (node.has_input(3)) {
    auto a = constant_ints(node.input(3));
    if (!a) return false;
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> steps(starts->size(), 1);
  if (node.has_input(4)) {
    auto st = constant_ints(node.input(4));
    if (!st || st->size() != starts->size()) return false;
    steps = *st;
  }
  if (axes.size() != starts->size()) return false;
  const std::vector<int64_t> in = plain_strides(x);
  View v;
  v.dims.assign(y.dims().begin(), y.dims().end());
  v.strides = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + x.rank() : axes[i];
    if (axis < 0 || axis >= x.rank() || steps[i] == 0) return false;
    const int64_t dim = x[static_cast<int>(axis)];
    int64_t start = (*starts)[i] < 0 ? (*starts)[i] + dim : (*starts)[i];
    start =
        steps[i] > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    v.offset += start * in[static_cast<size_t>(axis)];
    v.strides[static_cast<size_t>(axis)] = in[static_cast<size_t>(axis)] * steps[i];
  }
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(fold_transpose(b, node.output(0), v));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

bool lower_split(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  int64_t axis = node.attrs<ops::Split>().axis;
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) return false;
  const std::vector<int64_t> in = plain_strides(x);
  const int from = b.buffer_of(node.input(0));
  std::vector<View> views;
  int64_t at = 0;
  for (const Value* out : node.outputs()) {
    const Shape y = shape_of(out);
    View v;
    v.dims.assign(y.dims().begin(), y.dims().end());
    v.strides = in;
    v.offset = at * in[static_cast<size_t>(axis)];
    at += y[static_cast<int>(axis)];
    views.push_back(std::move(v));
  }
  if (at != x[static_cast<int>(axis)]) return false;
  for (size_t i = 0; i < views.size(); ++i) {
    views[i].to = b.define(fold_transpose(b, node.output(static_cast<int>(i)), views[i]));
  }
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), views);
}

bool lower_gather(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  auto index = constant_ints(node.input(1));
  // One index (a scalar): a view without the axis.
  if (!index || index->size() != 1 || node.input(1)->tensor_type().rank() != 0) return false;
  int64_t axis = node.attrs<ops::Gather>().axis;
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) return false;
  const int64_t dim = x[static_cast<int>(axis)];
  const int64_t i = (*index)[0] < 0 ? (*index)[0] + dim : (*index)[0];
  if (i < 0 || i >= dim) return false;
  const std::vector<int64_t> in = plain_strides(x);
  View v;
  for (int d = 0; d < x.rank(); ++d) {
    if (d == axis) continue;
    v.dims.push_back(x[d]);
    v.strides.push_back(in[static_cast<size_t>(d)]);
  }
  v.offset = i * in[static_cast<size_t>(axis)];
  if (v.dims.empty()) {  // a scalar result: one element
    v.dims.push_back(1);
    v.strides.push_back(1);
  }
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(fold_transpose(b, node.output(0), v));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

bool lower_expand(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  if (y.rank() > kMaxRank || x.rank() > y.rank()) return false;
  View v;
  v.dims.assign(y.dims().begin(), y.dims().end());
  v.strides.resize(static_cast<size_t>(y.rank()));
  broadcast_strides(x, y, v.strides.data());
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(node.output(0));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

bool lower_layernorm(Builder& b, const Node& node, const Value* in, const Value* out) {
  const auto& op = node.attrs<ops::LayerNormalization>();
  if (node.num_outputs() != 1) return false;
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  const Shape x = shape_of(in);
  int64_t axis = op.axis < 0 ? op.axis + x.rank() : op.axis;
  if (axis < 0 || axis >= x.rank()) return false;
  int64_t cols = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) cols *= x[d];
  if (cols == 0) return false;
  const int64_t rows = x.numel() / cols;
  // Scale and bias: constants of any float type, applied in f32.
  std::optional<std::vector<float>> scale = constant_floats(node.input(1));
  std::optional<std::vector<float>> bias;
  if (node.has_input(2)) {
    bias = constant_floats(node.input(2));
    if (!bias || static_cast<int64_t>(bias->size()) != cols) return false;
  }
  if (!scale || static_cast<int64_t>(scale->size()) != cols) return false;
  const int si = b.constant(std::move(*scale));
  const int bi = bias ? b.constant(std::move(*bias)) : -1;
  const int xi = b.buffer_of(in);
  const int yi = b.define(out);
  const float epsilon = op.epsilon;
  std::vector<int> reads = {xi, si};
  if (bi >= 0) reads.push_back(bi);
  add(b, node, "LayerNormalization", reads, {yi}, [=, e = *e](Session& s) {
    return launch_layernorm(e, ptr(s, xi), ptr(s, yi), f32(s, si), bi >= 0 ? f32(s, bi) : nullptr,
                            rows, cols, epsilon, s.stream);
  });
  return true;
}
bool lower_layernorm(Builder& b, const Node& node) {
  return lower_layernorm(b, node, node.input(0), node.output(0));
}

// Cast between f32, f16 and bf16 (a cast to the same type shares the buffer).
bool lower_cast(Builder& b, const Node& node) {
  const std::optional<Elem> from = elem_of(node.input(0));
  const std::optional<Elem> to = elem_of(node.output(0));
  if (!from || !to) return false;
  if (*from == *to) return lower_alias(b, node);
  const int xi = b.stored_buffer(node.input(0));  // keeps its input's layout
  const int yi = b.define(node.output(0), b.is_nhwc(node.input(0)));
  const int64_t n = shape_of(node.output(0)).numel();
  add(b, node, "Cast", {xi}, {yi}, [=, from = *from, to = *to](Session& s) {
    return launch_cast(from, to, ptr(s, xi), ptr(s, yi), n, s.stream);
  });
  return true;
}

// ---- transformer patterns ----

bool is_scalar(const Value* v, float want, float tolerance) {
  std::optional<std::vector<float>> c = constant_floats(v);
  return c && c->size() == 1 && std::fabs((*c)[0] - want) <= tolerance;
}

// Cast(half -> f32) -> op -> Cast(f32 -> half), what the fp16/bf16 conversion leaves around
// LayerNormalization, Softmax and Erf: the op runs on the half tensors directly. Its kernels load
// half and compute in f32, so the result is the same, without two passes over an f32 copy (ViT's
// attention scores at batch 256: 2.4 GB a layer through the casts, 0.5 GB without).
bool lower_in_half(Builder& b, const Node& cast) {
  const std::optional<Elem> half = elem_of(cast.input(0));
  if (!half || *half == Elem::kF32 || elem_of(cast.output(0)) != Elem::kF32) return false;
  const Node* op = b.only_consumer(cast.output(0));
  if (op == nullptr || op->num_outputs() != 1 || op->input(0) != cast.output(0)) return false;
  const Node* back = consumer_as(b, op->output(0), OpKind::kCast);
  if (back == nullptr || elem_of(back->output(0)) != half) return false;
  const Value* x = cast.input(0);
  const Value* y = back->output(0);
  bool lowered = false;
  switch (op->kind()) {
    case OpKind::kLayerNormalization: lowered = lower_layernorm(b, *op, x, y); break;
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: lowered = lower_softmax(b, *op, x, y); break;
    default: lowered = lower_unary(b, *op, x, y); break;
  }
  if (lowered) {
    b.mark_fused(op);
    b.mark_fused(back);
  }
  return lowered;
}

// The exact GELU as exported from PyTorch, x * (1 + erf(x / sqrt(2))) * 0.5, from its Div (or Mul
// by 1/sqrt(2)) `scale`, with the fp16/bf16 conversion's Casts around the Erf or without: its nodes
// (`scale` first, the final Mul last), else nothing.
std::optional<std::vector<const Node*>> gelu_chain(const Builder& b, const Node& scale) {
  const Value* x = scale.input(0);
  if (scale.num_inputs() != 2 ||
      !(scale.kind() == OpKind::kDiv ? is_scalar(scale.input(1), 1.41421356f, 1e-3f)
                                     : is_scalar(scale.input(1), 0.70710678f, 1e-3f))) {
    return std::nullopt;
  }
  std::vector<const Node*> chain = {&scale};
  const Value* at = scale.output(0);
  const Node* to_f32 = consumer_as(b, at, OpKind::kCast);
  if (to_f32 != nullptr) {
    chain.push_back(to_f32);
    at = to_f32->output(0);
  }
  const Node* erf = consumer_as(b, at, OpKind::kErf);
  if (erf == nullptr) return std::nullopt;
  chain.push_back(erf);
  at = erf->output(0);
  if (to_f32 != nullptr) {
    const Node* back = consumer_as(b, at, OpKind::kCast);
    if (back == nullptr) return std::nullopt;
    chain.push_back(back);
    at = back->output(0);
  }
  const Node* one = consumer_as(b, at, OpKind::kAdd);
  if (one == nullptr || !is_scalar(other_operand(*one, at), 1.0f, 0.0f)) return std::nullopt;
  const Node* times_x = consumer_as(b, one->output(0), OpKind::kMul);
  if (times_x == nullptr || other_operand(*times_x, one->output(0)) != x) return std::nullopt;
  const Node* half = consumer_as(b, times_x->output(0), OpKind::kMul);
  if (half == nullptr || !is_scalar(other_operand(*half, times_x->output(0)), 0.5f, 0.0f)) {
    return std::nullopt;
  }
  chain.insert(chain.end(), {one, times_x, half});
  return chain;
}

// The GELU of gelu_chain as one elementwise step instead of five (seven with the casts).
bool lower_gelu(Builder& b, const Node& scale) {
  std::optional<std::vector<const Node*>> chain = gelu_chain(b, scale);
  if (!chain || !add_unary(b, scale, "Gelu", {Unary::kGelu, {0.0f, 0.0f}}, scale.input(0),
                           chain->back()->output(0))) {
    return false;
  }
  for (size_t i = 1; i < chain->size(); ++i) b.mark_fused((*chain)[i]);
  return true;
}

// The GELU that alone reads `x` (a Gelu op, or gelu_chain's Div and Mul by x as the only readers),
// as its nodes, for cuBLASLt's GELU epilogue: only for f16/bf16 results (the epilogue is the tanh
// approximation, at most 4.7e-4 from the exact GELU, at x = 2.7 where f16's spacing is 2e-3) and
// unless KILN_CUDA_GELU_EPILOGUE=0.
std::optional<std::vector<const Node*>> gelu_reading(const Builder& b, const Value* x) {
  const char* env = env_flag_c_str(EnvFlag::kCudaGeluEpilogue);
  if ((env != nullptr && std::strcmp(env, "0") == 0) || elem_of(x) == Elem::kF32) {
    return std::nullopt;
  }
  for (const Value* out : b.graph().outputs()) {
    if (out == x) return std::nullopt;
  }
  // A Gelu op (either form) as the only reader.
  if (const Node* gelu = consumer_as(b, x, OpKind::kGelu)) return std::vector<const Node*>{gelu};
  if (x->uses().size() != 2) return std::nullopt;
  for (const auto& use : x->uses()) {
    if (use.node->kind() != OpKind::kDiv && use.node->kind() != OpKind::kMul) continue;
    std::optional<std::vector<const Node*>> chain = gelu_chain(b, *use.node);
    if (!chain) continue;
    const Node* other = x->uses()[0].node == use.node ? x->uses()[1].node : x->uses()[0].node;
    if (std::find(chain->begin(), chain->end(), other) != chain->end()) return chain;
  }
  return std::nullopt;
}

}  // namespace

std::vector<uint8_t> nhwc_bytes(const Tensor& t, int64_t channels) {
  const Shape s = t.shape();
  const size_t es = dtype_size(t.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(s[0] * s[2] * s[3] * channels) * es, 0);
  const auto* in = static_cast<const uint8_t*>(t.raw_data());
  size_t at = 0;
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t h = 0; h < s[2]; ++h) {
      for (int64_t w = 0; w < s[3]; ++w) {
        for (int64_t c = 0; c < s[1]; ++c) {
          const size_t from = static_cast<size_t>(((n * s[1] + c) * s[2] + h) * s[3] + w) * es;
          std::memcpy(out.data() + at + static_cast<size_t>(c) * es, in + from, es);
        }
        at += static_cast<size_t>(channels) * es;
      }
    }
  }
  return out;
}

void add_reorder(Builder& b, int from, int to, const Shape& x, bool to_nhwc) {
  // Output dims in storage order, each read at the input's stride for that dim.
  const std::vector<int64_t> dims = to_nhwc ? std::vector<int64_t>{x[0], x[2], x[3], x[1]}
                                            : std::vector<int64_t>{x[0], x[1], x[2], x[3]};
  const std::vector<int64_t> strides =
      to_nhwc ? std::vector<int64_t>{x[1] * x[2] * x[3], x[3], 1, x[2] * x[3]}   // from NCHW
              : std::vector<int64_t>{x[2] * x[3] * x[1], 1, x[3] * x[1], x[1]};  // from NHWC
  const int64_t n = x.numel();
  const int es = static_cast<int>(dtype_size(b.buffer(from).dtype));
  add(b, b.current(), to_nhwc ? "Reorder NCHW>NHWC" : "Reorder NHWC>NCHW", {from}, {to},
      [=](Session& s) {
        return launch_permute(ptr(s, from), ptr(s, to), n, 4, dims.data(), strides.data(), es,
                              s.stream);
      });
}

Result<bool> lower_device(Builder& b, const Node& node) {
  for (const Value* v : node.outputs()) {
    if (v == nullptr) return false;
  }
  KILN_ASSIGN_OR_RETURN(bool quantized, lower_quantized(b, node));
  if (quantized) return true;
  if (lower_attention(b, node)) return true;
  switch (node.kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: return lower_alias(b, node);
    case OpKind::kDropout:
      return node.num_inputs() == 1 && node.num_outputs() == 1 && lower_alias(b, node);
    case OpKind::kConv: return lower_conv(b, node);
    case OpKind::kGemm:
    case OpKind::kMatMul: return lower_matmul(b, node);
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: return lower_pool(b, node);
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool: return lower_global_pool(b, node);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: return lower_fused(b, node) || lower_softmax(b, node);
    case OpKind::kBatchNormalization: return lower_batchnorm(b, node);
    case OpKind::kConcat: return lower_concat(b, node);
    case OpKind::kTranspose: return lower_fused(b, node) || lower_transpose(b, node);
    case OpKind::kCast:
      return lower_fused(b, node) || lower_in_half(b, node) || lower_cast(b, node);
    case OpKind::kSlice: return lower_slice(b, node);
    case OpKind::kSplit: return lower_split(b, node);
    case OpKind::kGather: return lower_gather(b, node);
    case OpKind::kExpand: return lower_expand(b, node);
    case OpKind::kLayerNormalization: return lower_fused(b, node) || lower_layernorm(b, node);
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax: return lower_fused(b, node);
    default: break;
  }
  if ((node.kind() == OpKind::kDiv || node.kind() == OpKind::kMul) && lower_gelu(b, node)) {
    return true;
  }
  if (lower_fused(b, node)) return true;
  if (binary_of(node.kind())) return lower_binary(b, node);
  return lower_unary(b, node);
}

}  // namespace kiln::compiler::cuda
