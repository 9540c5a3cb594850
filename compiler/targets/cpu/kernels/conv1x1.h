// SPDX-License-Identifier: Apache-2.0
// 1x1 convolutions of a batch of one over nChw16c as kiln's own AVX-512 GEMM.
#pragma once

#include <cstdint>

namespace kiln::compiler::cpu {

struct Conv1x1Shape {
  int64_t in = 0;      // input channels, a multiple of 16
  int64_t out = 0;     // output channels, a multiple of 16
  int64_t pixels = 0;  // H x W, of the input and the output
};

// y = W x + bias + residual, then max(0, .) when `relu`, for x [in/16][pixels][16] (nChw16c of a
// batch of one), W packed OIhw16i64o ([out/64][in/16][16][64], output channels padded to 64) and y,
// residual [out/16][pixels][16]. `bias` (out floats) and `residual` may be null; `residual` may be
// `y` (adding in place). Tiles of 4 output channel blocks by 6 pixels in registers, input channels
// in passes of at most 96 (their weights stay in L1 while the tile walks the pixels). The OpenMP
// team claims items (64 output channels over a range of pixels) one at a time. Needs
// has_fast_silu() (AVX-512); denormals flushed while it runs.
void conv1x1_f32(const Conv1x1Shape& shape, const float* x, const float* weights, const float* bias,
                 const float* residual, bool relu, float* y);

// conv1x1_f32's work for output channels [64 group, 64 group + 64) over pixels [first, last),
// without bias, residual or Relu, on the calling thread alone (its caller splits the work and sets
// the floating point mode): the products of winograd_conv.cc.
void conv1x1_group_f32(const Conv1x1Shape& shape, const float* x, const float* weights,
                       int64_t group, int64_t first, int64_t last, float* y);

}  // namespace kiln::compiler::cpu
