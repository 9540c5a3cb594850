// SPDX-License-Identifier: Apache-2.0
// Launchers of the cuda target's 8-bit kernels (int8.cu), for the int8 lowering (quantized.h):
// plain C++, no CUDA headers needed. An 8-bit tensor is read and written as u8 or s8 (`*_u8`), its
// integer value offset by `*_off` (a zero point added or removed) and saturated to [lo, hi].
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// The logical [N, C, S] view of a 4-D (S = H * W) or 2-D (S = 1) tensor, and how it is stored:
// NHWC (`nhwc`, `stored_c` >= C channels per pixel, the added ones zero) or NCHW / row-major.
struct Int8Layout {
  int64_t n = 0, c = 0, s = 1;
  int64_t stored_c = 0;
  bool nhwc = false;
};

// y = clamp(round_half_even(x / scale) + y_off, lo, hi) from float `x` (element type `e`, stored
// as `xl`) into 8-bit `y` stored as `yl`; padded channels of `y` are written 0.
Status launch_quantize8(Elem e, const void* x, const Int8Layout& xl, void* y, const Int8Layout& yl,
                        bool y_u8, float scale, int32_t y_off, int32_t lo, int32_t hi,
                        void* stream);

// The first convolution's input on f16 tensor cores: y[n, s, 0..7] (f16, NHWC, 8 channels, the
// ones past `c` zero) = clamp(round_half_even(x / scale) + zp, lo, hi) - zp, the centered 8-bit
// value held exactly as an f16 integer, from f32 NCHW `x` [n, c, s] (c <= 8).
Status launch_quantize_to_f16x8(const float* x, int64_t n, int64_t c, int64_t s, float scale,
                                int32_t zp, int32_t lo, int32_t hi, void* y, void* stream);

// The same values rearranged space-to-depth for a stride-2 first convolution run as a stride-1
// one: y[n, h/2, w/2, 16] (f16 integers, or s8 when `s8`: lo and hi then keep them in s8) holds at
// channel (dy * 2 + dx) * c + ci pixel (2 * i + dy, 2 * j + dx) of channel ci (c <= 4, h and w
// even, x 8-byte aligned; channels past 4c zero).
Status launch_quantize_s2d(const float* x, int64_t n, int64_t c, int64_t h, int64_t w, float scale,
                           int32_t zp, int32_t lo, int32_t hi, bool s8, void* y, void* stream);

// y = scale * (x - x_off) as float type `e`, from 8-bit `x` stored as `xl` into `y` stored as `yl`
// (padded channels of `x` skipped).
Status launch_dequantize8(const void* x, const Int8Layout& xl, bool x_u8, int32_t x_off,
                          float scale, Elem e, void* y, const Int8Layout& yl, void* stream);

// Elementwise over `n` 8-bit values of one layout: y = clamp(round_half_even((a - a_off) * ka +
// (b - b_off) * kb) + y_off, lo, hi); `b` may be null (then only a's term).
struct Requant8 {
  const void* a = nullptr;
  bool a_u8 = false;
  int32_t a_off = 0;
  float ka = 1.0f;
  const void* b = nullptr;
  bool b_u8 = false;
  int32_t b_off = 0;
  float kb = 0.0f;
  void* y = nullptr;
  bool y_u8 = false;
  int32_t y_off = 0;
  int32_t lo = -128, hi = 127;
};
Status launch_requant8(const Requant8& r, int64_t n, void* stream);

// y[n, c] = scale * mean over the s pixels of s8 NHWC `x` [n, s, stored_c] (centered values): a
// DequantizeLinear and the GlobalAveragePool after it in one pass over the 8-bit data.
Status launch_mean8(const void* x, int64_t n, int64_t c, int64_t stored_c, int64_t s, float scale,
                    float* y, void* stream);

// Squeeze-and-excitation's scaling on the 8-bit values: y[n, p, c] = round_half_even(x[n, p, c] *
// k * sigmoid(gate[n, c])) clamped to [lo, hi], x and y centered s8 NHWC [n, s, stored_c] (stored_c
// a multiple of 4; channels from c on stay 0), `gate` f32 [n, c], k = x_scale / y_scale.
struct ChannelScale8 {
  const void* x = nullptr;
  const float* gate = nullptr;
  void* y = nullptr;
  int64_t n = 0, c = 0, stored_c = 0, s = 0;
  float k = 1.0f;
  int32_t lo = -128, hi = 127;
};
Status launch_channel_scale8(const ChannelScale8& p, void* stream);

// Max pooling of s8 NHWC `x` [n, h, w, c] into `y` [n, oh, ow, c] (window kh x kw, strides,
// leading pads; positions outside the image are skipped).
struct Pool8 {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};
Status launch_maxpool8(const void* x, void* y, const Pool8& p, void* stream);

// Depthwise convolution of centered s8 NHWC `x` [n, h, w, c] (zero is 0: taps outside the image
// add nothing) with s8 filters `w` [kh, kw, c] into s8 NHWC `y` [n, oh, ow, c]:
// y = clamp(round_half_even(sum * scale[ch] + bias[ch]), lo, hi), scale and bias f32 [c] (16-byte
// aligned); c is the stored channel count, a multiple of 4.
struct Depthwise8 {
  const void* x = nullptr;
  const void* w = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;
  void* y = nullptr;
  int64_t n = 0, h = 0, width = 0, c = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int32_t lo = -128, hi = 127;
  // When > 0, the output's scale: the requantized value v becomes v * sigmoid(v * silu), the SiLU
  // of the real value in the output's units (QLinearConv's fused "SiLU").
  float silu = 0.0f;
};
Status launch_depthwise8(const Depthwise8& p, void* stream);

}  // namespace kiln::compiler::cuda
