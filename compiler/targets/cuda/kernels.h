// SPDX-License-Identifier: Apache-2.0
// Launchers of the cuda target's own kernels (kernels.cu): plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace kiln::compiler::cuda {

// The most dims the broadcasting and transposing kernels index.
inline constexpr int kMaxRank = 8;

// The element types of the float kernels; they compute in f32.
enum class Elem : int32_t { kF32, kF16, kBF16 };

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

// The strides (in elements) of one operand of a broadcast, per output dim; 0 where it broadcasts.
struct BroadcastIndex {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};

// Each launcher queues its kernel on `stream` (a cudaStream_t) over tensors of element type `e`
// and returns the launch error, if any, as kUnavailable naming the kernel.
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

// The window of a 2-D pooling or depthwise convolution over x [n, c, h, w] giving y [n, c, oh, ow]:
// kernel kh x kw, strides, leading pads (the trailing ones follow from oh/ow) and dilations.
struct Window2d {
  bool nhwc = false;  // x and y stored channels last
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// Max or average 2-D pooling over a window.
struct Pool2d : Window2d {
  bool max = true;
  bool count_include_pad = false;
};
Status launch_pool2d(Elem e, const Pool2d& p, const void* x, void* y, void* stream);
// A depthwise 2-D convolution (group = input channels = output channels, one filter per channel):
// y = clamp(bias[c] + sum over the window of x * weight, lo, hi) (then SiLU), f32 accumulation.
// `ph`/`pw` are the leading pads (the trailing ones follow from oh/ow, so asymmetric pads
// work).
struct DepthwiseConv : Window2d {
  float lo = -__builtin_huge_valf(), hi = __builtin_huge_valf();  // ReLU: [0, inf), ReLU6: [0, 6]
  bool silu = false;  // after the clamp, v * sigmoid(v) (EfficientNet's SiLU)
  // x is read as min(x, in_hi): the upper bound of a ReLU6 that the convolution writing x left
  // to this read (so that its own epilogue is a plain ReLU, which cuDNN fuses).
  float in_hi = __builtin_huge_valf();
};
// `weight`: f32 [kh * kw, c] (tap-major, channels contiguous); `bias`: f32 [c] or null. NHWC with
// c a multiple of 16 bytes of elements, kw 3 or 5, sw 1 or 2 and no dilation runs vectorized (16
// bytes of channels a thread, several output pixels of a row each); anything else one element a
// thread.
Status launch_depthwise_conv(Elem e, const DepthwiseConv& p, const void* x, const float* weight,
                             const float* bias, void* y, void* stream);
// Mean (or max) over the `hw` pixels of each (image, channel) of x ([batch, channels, hw], or
// [batch, hw, channels] when `nhwc`) into y ([batch, channels]).
Status launch_global_pool(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                          int64_t hw, bool nhwc, bool max, void* stream);
// Layer normalization over the last `cols` elements of each of `rows` rows (f32 statistics):
// y = (x - mean) / sqrt(var + epsilon) * scale + bias; bias may be null.
Status launch_layernorm(Elem e, const void* x, void* y, const float* scale, const float* bias,
                        int64_t rows, int64_t cols, float epsilon, void* stream);
// Softmax (or log-softmax) over the last `cols` elements of each of `rows` rows.
Status launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                      void* stream);
// y, NHWC [batch, hw, padded], from x ([batch, channels, hw], or [batch, hw, channels] when
// `x_nhwc`) with channels widened to `padded`, the new ones zero: the input of a convolution whose
// channel count tensor cores cannot take as it is (an image's 3).
Status launch_pad_channels(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                           int64_t hw, int64_t padded, bool x_nhwc, void* stream);
// y (dims `out_dims`) from x read at `in_strides` per output dim: transposes and strided copies of
// any element size (1, 2, 4 or 8 bytes).
Status launch_permute(const void* x, void* y, int64_t n, int rank, const int64_t* out_dims,
                      const int64_t* in_strides, int element_bytes, void* stream);

}  // namespace kiln::compiler::cuda
