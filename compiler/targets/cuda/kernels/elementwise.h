// SPDX-License-Identifier: Apache-2.0
// Launchers of the elementwise kernels (elementwise.cu): unary functions, casts, broadcasting
// binary ops, the per-channel affine (bias, BatchNorm) with its activation and the per-channel
// scaling of squeeze-and-excitation. Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// Elementwise unary functions. `alpha`/`beta` are the op's attributes where it has them.
enum class Unary : int32_t {
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kNeg,
  kAbs,
  kSqrt,
  kErf,
  kReciprocal,
  kFloor,
  kCeil,
  kSin,
  kCos,
  kSoftplus,
  kLeakyRelu,    // alpha
  kElu,          // alpha
  kClip,         // [alpha, beta]
  kHardSigmoid,  // max(0, min(1, alpha * x + beta))
  kHardSwish,
  kGelu,      // exact (erf) form
  kGeluTanh,  // the tanh approximation
  kSwish,     // x * sigmoid(alpha * x)
  kIdentity,
  kScale,  // alpha * x
};

enum class Binary : int32_t { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };

Status launch_unary(Elem e, Unary op, const void* x, void* y, int64_t n, float alpha, float beta,
                    void* stream);
// y = x converted (rounding to nearest even) from `from` to `to`.
Status launch_cast(Elem from, Elem to, const void* x, void* y, int64_t n, void* stream);
// y[i] = a[..] op b[..] over the broadcast output of `index`; `contiguous` when both operands
// have the output's shape (no indexing needed); `relu` applies max(0, .) to the result.
Status launch_binary(Elem e, Binary op, const void* a, const void* b, void* y, int64_t n,
                     const BroadcastIndex& index, bool contiguous, bool relu, void* stream);
// Over NC(spatial) (in place when x == y): y = clamp(x * scale[c] + shift[c] + residual, lo, hi);
// scale may be null (1), shift may be null (0), both f32; residual (x's type and shape) may be null
// (0). ReLU is lo = 0, hi = inf; ReLU6 (Clip) lo = 0, hi = 6. `silu` then applies v * sigmoid(v).
Status launch_channel_affine(Elem e, const void* x, void* y, const float* scale, const float* shift,
                             const void* residual, int64_t n, int64_t channels, int64_t inner,
                             float lo, float hi, void* stream, bool silu = false);
// Squeeze-and-excitation's scaling: y[n, c, p] = x[n, c, p] * s[n, c] over `hw` pixels p (x and y
// NHWC, [n, p, c], when `nhwc`), s ([batch, channels], x's type) through a sigmoid when `sigmoid`.
Status launch_channel_scale(Elem e, const void* x, const void* s, void* y, int64_t batch,
                            int64_t channels, int64_t hw, bool nhwc, bool sigmoid, void* stream);

}  // namespace kiln::compiler::cuda
