// SPDX-License-Identifier: Apache-2.0
// The own int8 convolution kernel (int8_gemm.cu), for lower_qlinear_conv.cc: an implicit GEMM on
// the int8 tensor cores (mma.sync m16n8k32, s8 x s8 -> s32) of the centered s8 NHWC activations
// [pixels, window x c] by the filter [k, r x s x c] (a plain GEMM for 1x1), with the same epilogue
// as the cuDNN graph of qlinear_conv_cudnn.cc: per-channel scale and bias, an optional s8 residual
// with its scale, the clamp, and s8 rounded to nearest even. Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace kiln::compiler::cuda {

// y [n, oh, ow, k] (s8 NHWC) from x [n, h, w, c] (s8 NHWC) and the filter w [k, r, s, c]
// (KRSC): output pixel (i, j) reads the window at input pixel (stride * i - ph, stride * j - pw),
// zeros outside the image.
//   v = acc * scale[k] + bias[k];  with a residual z (y's shape): v = (v + z) * rescale;
//   with silu > 0 (no residual): v = v * sigmoid(v * silu), the SiLU of the real value, silu
//   being the output's scale;
//   y = round_half_even(clamp(v, lo, hi))
// each step an f32 operation rounded to nearest, as cuDNN's pointwise graph computes it.
struct Int8Gemm {
  int64_t n = 0, h = 0, w = 0, c = 0, k = 0, oh = 0, ow = 0;
  int64_t r = 1, s = 1, ph = 0, pw = 0;
  int stride = 1;
  bool residual = false;
  float rescale = 1.0f;
  int32_t lo = -128, hi = 127;
  float silu = 0.0f;
};

// The tile configurations the kernel is built for (tuning candidates), and one's name
// ("128x128x64/4": block rows x columns x reduction bytes / pipeline stages).
int int8_gemm_configs();
const char* int8_gemm_config_name(int config);

// Whether launch_int8_gemm takes `p`: c a multiple of 8 (16 loads whole taps; 8 in halves), k of
// 16, stride 1 or 2, leading pads smaller than the window, 32-bit offsets.
bool int8_gemm_supported(const Int8Gemm& p);

// `w`: s8 [k, r, s, c]; `scale`, `bias`: f32 [k]; `z`: s8, y's shape, when p.residual (else
// ignored).
Status launch_int8_gemm(int config, const Int8Gemm& p, const void* x, const void* w,
                        const float* scale, const float* bias, const void* z, void* y,
                        void* stream);

}  // namespace kiln::compiler::cuda
