// SPDX-License-Identifier: Apache-2.0
// Launcher of the depthwise convolution kernels (depthwise_conv.cu). Plain C++, no CUDA headers
// needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

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

}  // namespace kiln::compiler::cuda
