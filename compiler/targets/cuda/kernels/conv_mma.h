// SPDX-License-Identifier: Apache-2.0
// The own f16/bf16 convolution kernel for convolutions of few input channels (conv_mma.cu): an
// implicit GEMM on the tensor cores (mma.sync), the filter in shared memory, the input window
// gathered straight from an NCHW or NHWC input, the output NHWC with bias, residual and clamp or
// SiLU in the same pass. Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// y [n, k, oh, ow] (stored NHWC) = conv(x [n, c, h, w]) over a kh x kw window (strides, leading
// pads, dilations), then clamp(. + bias[k] + residual, lo, hi), then v * sigmoid(v) when `silu`.
struct ConvMma {
  bool x_nhwc = false;  // x stored channels last (else NCHW); y is always NHWC
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  float lo = -__builtin_huge_valf(), hi = __builtin_huge_valf();
  bool silu = false;
};

// The reduction length the filter is stored with: c * kh * kw rounded up to a multiple of 16.
int64_t conv_mma_depth(const ConvMma& p);
// Whether launch_conv_mma takes `p`: k a multiple of 8 up to 128, a reduction of at most 256, the
// filter and the staging tiles within the shared memory a block may have, 32-bit offsets.
bool conv_mma_supported(const ConvMma& p);
// The order of the reduction index r the filter `weight` [k, conv_mma_depth(p)] (x's type, zeros
// past c * kh * kw) is stored in: for NCHW x, r = (ci * kh + i) * kw + j (a KCRS filter as it is);
// for NHWC x, r = (i * kw + j) * c + ci (KRSC).
// `bias`: f32 [k] or null; `residual`: NHWC, y's shape and type, or null.
Status launch_conv_mma(Elem e, const ConvMma& p, const void* x, const void* weight,
                       const float* bias, const void* residual, void* y, void* stream);

}  // namespace kiln::compiler::cuda
