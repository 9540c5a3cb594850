// SPDX-License-Identifier: Apache-2.0
// QLinearConv's cuDNN graph, its plans and their timing (qlinear_conv_cudnn.h).
#include "compiler/targets/cuda/qlinear_conv_cudnn.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "compiler/targets/cuda/autotune.h"
#include "compiler/targets/cuda/tuning.h"

namespace kiln::compiler::cuda {

struct Desc {
  explicit Desc(cudnnBackendDescriptorType_t type) {
    status = cudnnBackendCreateDescriptor(type, &d);
  }
  ~Desc() {
    if (d != nullptr) cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const T* values) {
    if (status == CUDNN_STATUS_SUCCESS) {
      status = cudnnBackendSetAttribute(d, name, type, count, values);
    }
  }
  Status finalize(std::string_view what) {
    if (status == CUDNN_STATUS_SUCCESS) status = cudnnBackendFinalize(d);
    return check_cudnn(status, what);
  }
  cudnnBackendDescriptor_t d = nullptr;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
};

namespace {

// The tensors' unique ids in the variant pack.
enum : int64_t { kX = 1, kW, kScale, kBias, kZ, kY, kRescale, kVirtual };

Result<DescPtr> tensor(ConvGraph& cg, int64_t uid, cudnnDataType_t type, std::vector<int64_t> nchw,
                       bool is_virtual) {
  // NHWC strides of logical NCHW dims.
  const int64_t c = nchw[1], h = nchw[2], w = nchw[3];
  const std::vector<int64_t> strides = {h * w * c, 1, w * c, c};
  auto t = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, nchw.data());
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  KILN_RETURN_IF_ERROR(t->finalize("int8 convolution tensor"));
  cg.keep.push_back(t);
  return t;
}

// A pointwise op y = mode(x, b) (b may be null); `clip` sets a ReLU's bounds.
Result<DescPtr> pointwise(ConvGraph& cg, cudnnPointwiseMode_t mode, const DescPtr& x,
                          const DescPtr& b, const DescPtr& y,
                          std::optional<std::pair<float, float>> clip) {
  auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  if (clip) {
    pw->set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_FLOAT, 1, &clip->first);
    pw->set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_FLOAT, 1, &clip->second);
  }
  KILN_RETURN_IF_ERROR(pw->finalize("int8 convolution pointwise descriptor"));
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw->d);
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
  if (b != nullptr) {
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d);
  }
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y->d);
  KILN_RETURN_IF_ERROR(op->finalize("int8 convolution pointwise op"));
  cg.keep.push_back(pw);
  cg.keep.push_back(op);
  return op;
}

Result<ConvGraph> conv_graph(cudnnHandle_t handle, const ConvProblem& p) {
  ConvGraph cg;
  const std::vector<int64_t> xd = {p.n, p.c, p.h, p.w};
  const std::vector<int64_t> wd = {p.k, p.c, p.r, p.s};
  const std::vector<int64_t> yd = {p.n, p.k, p.oh, p.ow};
  const std::vector<int64_t> kd = {1, p.k, 1, 1};
  int64_t next_virtual = kVirtual;
  const cudnnDataType_t in_type = p.half ? CUDNN_DATA_HALF : CUDNN_DATA_INT8;
  KILN_ASSIGN_OR_RETURN(DescPtr x, tensor(cg, kX, in_type, xd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr w, tensor(cg, kW, in_type, wd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr acc, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
  KILN_ASSIGN_OR_RETURN(DescPtr scale, tensor(cg, kScale, CUDNN_DATA_FLOAT, kd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr bias, tensor(cg, kBias, CUDNN_DATA_FLOAT, kd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr scaled, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
  KILN_ASSIGN_OR_RETURN(DescPtr y,
                        tensor(cg, kY, p.half_out ? CUDNN_DATA_HALF : CUDNN_DATA_INT8, yd, false));
  // The s8 output saturates to [-128, 127]; a ReLU clamps tighter where the bounds say.
  const bool clamp = p.lo > -128 || p.hi < 127;
  KILN_ASSIGN_OR_RETURN(DescPtr biased, (clamp || p.residual)
                                            ? tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true)
                                            : Result<DescPtr>(y));
  auto conv = std::make_shared<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = p.half ? CUDNN_DATA_FLOAT : CUDNN_DATA_INT32;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p.dilations.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, p.strides.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p.pre.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p.post.data());
  KILN_RETURN_IF_ERROR(conv->finalize("int8 convolution descriptor"));
  cg.keep.push_back(conv);
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float one = 1.0f;
  const float zero = 0.0f;
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &acc->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &conv->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  KILN_RETURN_IF_ERROR(op->finalize("int8 convolution op"));
  cg.keep.push_back(op);
  std::vector<cudnnBackendDescriptor_t> ops = {op->d};
  KILN_ASSIGN_OR_RETURN(DescPtr mul,
                        pointwise(cg, CUDNN_POINTWISE_MUL, acc, scale, scaled, std::nullopt));
  ops.push_back(mul->d);
  KILN_ASSIGN_OR_RETURN(DescPtr add_bias,
                        pointwise(cg, CUDNN_POINTWISE_ADD, scaled, bias, biased, std::nullopt));
  ops.push_back(add_bias->d);
  DescPtr last = biased;
  if (p.residual) {
    KILN_ASSIGN_OR_RETURN(DescPtr z, tensor(cg, kZ, CUDNN_DATA_INT8, yd, false));
    KILN_ASSIGN_OR_RETURN(DescPtr summed, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
    KILN_ASSIGN_OR_RETURN(DescPtr add_z,
                          pointwise(cg, CUDNN_POINTWISE_ADD, biased, z, summed, std::nullopt));
    ops.push_back(add_z->d);
    last = summed;
    {
      KILN_ASSIGN_OR_RETURN(DescPtr factor, tensor(cg, kRescale, CUDNN_DATA_FLOAT, kd, false));
      KILN_ASSIGN_OR_RETURN(
          DescPtr scaled_sum,
          clamp ? tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true) : Result<DescPtr>(y));
      KILN_ASSIGN_OR_RETURN(DescPtr mul_back, pointwise(cg, CUDNN_POINTWISE_MUL, summed, factor,
                                                        scaled_sum, std::nullopt));
      ops.push_back(mul_back->d);
      last = scaled_sum;
    }
  }
  if (clamp) {
    // A plain ReLU where the bounds are [0, 127] (the output's saturation does the rest).
    std::optional<std::pair<float, float>> clip;
    if (p.lo != 0 || p.hi != 127) {
      clip = std::make_pair(static_cast<float>(p.lo), static_cast<float>(p.hi));
    }
    KILN_ASSIGN_OR_RETURN(DescPtr relu,
                          pointwise(cg, CUDNN_POINTWISE_RELU_FWD, last, nullptr, y, clip));
    ops.push_back(relu->d);
  }
  cg.graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cg.graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                static_cast<int64_t>(ops.size()), ops.data());
  cg.graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  KILN_RETURN_IF_ERROR(cg.graph->finalize("int8 convolution graph"));
  return cg;
}

// The plans of cuDNN's first `limit` heuristic candidates (mode A), in order; null for one that
// does not finalize (so that indices stay the heuristic's).
std::vector<std::shared_ptr<ConvPlan>> candidate_plans(cudnnHandle_t handle, const ConvGraph& cg,
                                                       size_t limit) {
  std::vector<std::shared_ptr<ConvPlan>> out;
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cg.graph->d);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (!heur.finalize("heuristics").ok()) return out;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               0, &count, nullptr) != CUDNN_STATUS_SUCCESS) {
    return out;
  }
  std::vector<DescPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->d);
  }
  int64_t got = 0;
  if (count == 0 ||
      cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               count, &got, raw.data()) != CUDNN_STATUS_SUCCESS) {
    return out;
  }
  for (int64_t i = 0; i < got && out.size() < limit; ++i) {
    auto plan = std::make_shared<ConvPlan>();
    plan->graph = cg;
    plan->configs = {configs[static_cast<size_t>(i)]};
    plan->plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                    &configs[static_cast<size_t>(i)]->d);
    if (!plan->plan->finalize("plan").ok()) {
      out.push_back(nullptr);  // keeps the heuristic's index
      continue;
    }
    int64_t workspace = 0;
    cudnnBackendGetAttribute(plan->plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                             CUDNN_TYPE_INT64, 1, nullptr, &workspace);
    plan->workspace = static_cast<size_t>(std::max<int64_t>(workspace, 0));
    out.push_back(plan);
  }
  return out;
}

}  // namespace

Status execute(cudnnHandle_t handle, const ConvPlan& plan, const ConvArgs& a) {
  std::vector<int64_t> uids = {kX, kW, kScale, kBias, kY};
  std::vector<void*> ptrs = {a.x, a.w, a.scale, a.bias, a.y};
  if (a.z != nullptr) {
    uids.push_back(kZ);
    ptrs.push_back(a.z);
  }
  if (a.rescale != nullptr) {
    uids.push_back(kRescale);
    ptrs.push_back(a.rescale);
  }
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &a.workspace);
  KILN_RETURN_IF_ERROR(pack.finalize("int8 convolution arguments"));
  return check_cudnn(cudnnBackendExecute(handle, plan.plan->d, pack.d), "int8 convolution");
}

// The GPU milliseconds of 3 runs of `run` after one trial on scratch operands of `p` (with
// `workspace` bytes), on a stream of its own, replayed as a CUDA graph (candidate_ms: the
// time of the three); infinity when it fails.
float scratch_ms(const ConvProblem& p, size_t workspace,
                 const std::function<Status(const ConvArgs&, cudaStream_t)>& run) {
  Scratch s;
  ConvArgs a;
  a.x = s.block(p.x_bytes(), 0x1d);
  a.w = s.block(p.w_bytes(), 0x05);
  a.scale = s.block(static_cast<size_t>(p.k) * 4, 0x3a);  // about 7e-4 as f32
  a.bias = s.block(static_cast<size_t>(p.k) * 4, 0x3a);
  a.y = s.block(p.y_bytes(), 0);
  if (p.residual) a.z = s.block(static_cast<size_t>(p.n * p.k * p.oh * p.ow), 0x11);
  if (p.residual) a.rescale = s.block(static_cast<size_t>(p.k) * 4, 0x3f);
  a.workspace = s.block(workspace, 0);
  s.events.resize(2);
  if (a.x == nullptr || a.w == nullptr || a.scale == nullptr || a.bias == nullptr ||
      a.y == nullptr || (p.residual && (a.z == nullptr || a.rescale == nullptr)) ||
      a.workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&s.events[0]) != cudaSuccess ||
      cudaEventCreate(&s.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return INFINITY;
  }
  return candidate_ms(s, [&] { return run(a, s.stream).ok(); });
}

// The GPU milliseconds of one execution of `plan` (scratch_ms).
float plan_ms(cudnnHandle_t handle, const ConvPlan& plan, const ConvProblem& p) {
  const float ms = scratch_ms(p, plan.workspace, [&](const ConvArgs& a, cudaStream_t stream) {
    KILN_RETURN_IF_ERROR(check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream"));
    return execute(handle, plan, a);
  });
  cudnnSetStream(handle, nullptr);
  return ms;
}

namespace {

// Each candidate's plan finalization can compile kernels (about 0.4 s): with 6, ResNet-50's 53
// convolutions took over 100 s to compile; the fastest was among the first 3 in every case of
// bench/quant/gpu/int8_conv_micro.cu.
// The f16 first convolution (one convolution, the slowest step) gets more. (8 for ResNet-50's
// residual graphs too changed no step's time measurably on an H200 and took its compile from 28 to
// 50 s.)
constexpr size_t kCandidates = 3;
constexpr size_t kMoreCandidates = 8;
constexpr size_t kMaxWorkspace = size_t{256} << 20;

}  // namespace

// The plan for `p`: the candidate stored for this GPU when it still finalizes, else the fastest
// of cuDNN's first kCandidates heuristic candidates (its time in `*ms`, else NaN there); null when
// none runs.
Result<std::shared_ptr<ConvPlan>> choose_plan(Builder& b, const ConvProblem& p, float* ms) {
  const size_t limit = p.half ? kMoreCandidates : kCandidates;
  if (ms != nullptr) *ms = NAN;
  // A graph cuDNN does not accept (an op or type combination it lacks) has no plan either.
  Result<ConvGraph> cg = conv_graph(b.cudnn(), p);
  if (!cg.ok()) return std::shared_ptr<ConvPlan>();
  const std::string key = p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    // Only the candidates up to the stored one are finalized (each can compile kernels).
    std::optional<int32_t> i = choice_value<int32_t>(*known);
    if (i && *i >= 0 && static_cast<size_t>(*i) < limit) {
      std::vector<std::shared_ptr<ConvPlan>> plans =
          candidate_plans(b.cudnn(), *cg, static_cast<size_t>(*i) + 1);
      if (static_cast<size_t>(*i) < plans.size() && plans[*i] != nullptr &&
          plans[*i]->workspace <= kMaxWorkspace) {
        b.record_choice(key, *known, false);
        return plans[*i];
      }
    }
  }
  std::vector<std::shared_ptr<ConvPlan>> plans = candidate_plans(b.cudnn(), *cg, limit);
  int32_t best = -1;
  float best_ms = INFINITY;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i] == nullptr || plans[i]->workspace > kMaxWorkspace) continue;
    const float ms = plan_ms(b.cudnn(), *plans[i], p);
    if (ms < best_ms) {
      best_ms = ms;
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0) return std::shared_ptr<ConvPlan>();
  if (ms != nullptr) *ms = best_ms;
  b.record_choice(key, choice_bytes(best), true);
  return plans[static_cast<size_t>(best)];
}

}  // namespace kiln::compiler::cuda
