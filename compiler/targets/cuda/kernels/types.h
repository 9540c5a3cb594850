// SPDX-License-Identifier: Apache-2.0
// What the cuda target's own kernels share (kernels/): the element types and the index and
// window parameters. Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

namespace kiln::compiler::cuda {

// The most dims the broadcasting and transposing kernels index.
inline constexpr int kMaxRank = 8;

// The element types of the float kernels; they compute in f32.
enum class Elem : int32_t { kF32, kF16, kBF16 };

// Each launcher of these kernels queues its kernel on `stream` (a cudaStream_t) over tensors of
// element type `e` and returns the launch error, if any, as kUnavailable naming the kernel.

// The strides (in elements) of one operand of a broadcast, per output dim; 0 where it broadcasts.
struct BroadcastIndex {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};

// The window of a 2-D pooling or depthwise convolution over x [n, c, h, w] giving y [n, c, oh, ow]:
// kernel kh x kw, strides, leading pads (the trailing ones follow from oh/ow) and dilations.
struct Window2d {
  bool nhwc = false;  // x and y stored channels last
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

}  // namespace kiln::compiler::cuda
