// SPDX-License-Identifier: Apache-2.0
// QLinearConv as one cuDNN graph (backend API): conv (s8 x s8, s32, or f16 integers in f32) ->
// x per-channel scale -> + bias -> [+ residual x scale] -> clamp -> s8 (or f16), the engine timed
// among cuDNN's first heuristic candidates and kept as a tuning choice.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/targets/cuda/builder.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// A cuDNN backend descriptor (qlinear_conv_cudnn.cc).
struct Desc;
using DescPtr = std::shared_ptr<Desc>;

// An int8 convolution's problem: shapes (NCHW order, stored NHWC), geometry, the residual and the
// output clamp.
struct ConvProblem {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, oh = 0, ow = 0;
  std::vector<int64_t> pre, post, strides, dilations;
  // The residual z enters unscaled: scale and bias are divided by its scale, z added, and the sum
  // multiplied back by a per-channel tensor (kRescale) holding that scale (pointwise ops whose
  // operands are all tensors; no alpha attributes).
  bool residual = false;
  float residual_scale = 0.0f;
  int32_t lo = -128, hi = 127;
  // f16 input and filter holding integers (half_stem), f32 accumulation; the output f16 (the
  // scaled value before rounding, quantized by a step after) where no engine writes s8.
  bool half = false;
  bool half_out = false;
  // The fused SiLU's output scale (IntConv::silu): the own kernel only, no cuDNN graph.
  float silu = 0.0f;

  size_t x_bytes() const { return static_cast<size_t>(n * c * h * w) * (half ? 2 : 1); }
  size_t w_bytes() const { return static_cast<size_t>(k * c * r * s) * (half ? 2 : 1); }
  size_t y_bytes() const { return static_cast<size_t>(n * k * oh * ow) * (half_out ? 2 : 1); }

  std::string key() const {
    return fmt::format(
        "qconv {} nhwc x[{},{},{},{}] w[{},{},{},{}] pads{},{},{},{} strides{},{} "
        "dilations{},{} residual{} clamp{},{}{}",
        half ? (half_out ? "f16->f16" : "f16->s8") : "s8", n, c, h, w, k, c, r, s, pre[0], pre[1],
        post[0], post[1], strides[0], strides[1], dilations[0], dilations[1], residual ? 1 : 0, lo,
        hi, silu > 0.0f ? " silu" : "");
  }
};

// The operation graph: conv (s32) -> * scale[K] -> + bias[K] -> [+ residual_scale * z] -> clamp
// -> s8 y, every intermediate virtual f32.
struct ConvGraph {
  std::vector<DescPtr> keep;  // every descriptor the graph refers to
  DescPtr graph;
};

// An execution plan of the graph (which it keeps alive) and its workspace.
struct ConvPlan {
  ConvGraph graph;
  std::vector<DescPtr> configs;
  DescPtr plan;
  size_t workspace = 0;
};

// Device pointers of one execution.
struct ConvArgs {
  void* x = nullptr;
  void* w = nullptr;
  void* scale = nullptr;
  void* bias = nullptr;
  void* z = nullptr;
  void* rescale = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
};

// Runs `plan` on the operands of `a` (on the handle's stream).
Status execute(cudnnHandle_t handle, const ConvPlan& plan, const ConvArgs& a);

// The GPU milliseconds of 3 runs of `run` after one trial on scratch operands of `p` (with
// `workspace` bytes), on a stream of its own, replayed as a CUDA graph (candidate_ms: the
// time of the three); infinity when it fails.
float scratch_ms(const ConvProblem& p, size_t workspace,
                 const std::function<Status(const ConvArgs&, cudaStream_t)>& run);

// The GPU milliseconds of one execution of `plan` (scratch_ms).
float plan_ms(cudnnHandle_t handle, const ConvPlan& plan, const ConvProblem& p);

// The plan for `p`: the candidate stored for this GPU when it still finalizes, else the fastest
// of cuDNN's first kCandidates heuristic candidates (its time in `*ms`, else NaN there); null when
// none runs.
Result<std::shared_ptr<ConvPlan>> choose_plan(Builder& b, const ConvProblem& p,
                                              float* ms = nullptr);

}  // namespace kiln::compiler::cuda
