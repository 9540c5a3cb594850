// SPDX-License-Identifier: Apache-2.0
// A network's first convolution (a few input channels, read as they come: NCHW) of a batch of one
// as kiln's own AVX-512 kernel, with its activation and the MaxPool after it in the same pass.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::compiler::cpu {

// A MaxPool over the convolution's output (square window, no dilation).
struct StemPool {
  int64_t kernel = 0;  // 0: no pooling
  int64_t stride = 1;
  int64_t pad = 0;  // top and left; windows are cut at the bottom and right edges
  int64_t out_h = 0;
  int64_t out_w = 0;
};

// The activation applied in registers before pooling and storing.
struct StemActivation {
  enum class Kind { kNone, kRelu, kClip, kSilu };
  Kind kind = Kind::kNone;
  float lo = 0.0f;  // kClip's bounds (MobileNetV2's ReLU6: 0 and 6)
  float hi = 0.0f;
};

struct StemShape {
  int64_t in = 0;  // input channels (at most 4)
  int64_t in_h = 0;
  int64_t in_w = 0;
  int64_t kernel = 0;  // square window
  int64_t stride = 1;
  int64_t pad = 0;  // top and left (bottom and right follow from the output size)
  int64_t out = 0;  // output channels, a multiple of 16
  int64_t out_h = 0;
  int64_t out_w = 0;
  StemPool pool;
  bool blocked = false;  // y in nChw16c; else NHWC
};

// The floats of scratch the kernel needs per thread (the convolution rows a pooled band reads).
int64_t stem_scratch_floats(const StemShape& s);

// y = maxpool(act(conv(x, W) + bias)) (no pool when s.pool.kernel is 0) for x NCHW
// [in][in_h][in_w], W packed [out/64][in][kernel][kernel][64] (output channels padded to 64 with
// zeros), bias `out` floats (may be null), y NHWC or nChw16c of the pooled (or convolution) size.
// `scratch` holds stem_scratch_floats() per thread for `threads` threads (the OpenMP team the
// kernel starts). Needs has_fast_silu() (AVX-512).
void stem_conv_f32(const StemShape& s, const float* x, const float* weights, const float* bias,
                   StemActivation act, float* y, float* scratch, int threads);

// Packs ONNX Conv weights [out][in][k][k] as stem_conv_f32 reads them.
std::vector<float> pack_stem_weights(const StemShape& s, const float* oihw);

}  // namespace kiln::compiler::cpu
