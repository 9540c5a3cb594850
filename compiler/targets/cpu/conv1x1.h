// SPDX-License-Identifier: Apache-2.0
// 1x1 convolutions of a batch of one over nChw16c as kiln's own AVX-512 GEMM.
#pragma once

#include <cstdint>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/program.h"

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

// Lowers a Conv (1x1, stride 1 or 2, no padding, one group, batch 1, f32, constant weights, its
// input in nChw16c) with its Relu, or with the residual Add `add` (the other input in nChw16c) and
// a Relu after it, to a step running conv1x1_f32, where that is faster than oneDNN's jit_1x1
// (conv1x1.cc says where) or KILN_CPU_CONV1X1=own asks for it; a stride-2 one over its input
// compacted into a scratch buffer first. A k x k Conv (k <= 7, stride 1 or 2, any padding) to 7x7
// or less with 256 or more outputs runs the same way over its input spread by taps (im2col). false,
// and nothing added, otherwise.
bool lower_conv1x1(ProgramBuilder& b, const Node& conv, const Node* add);

// An error naming KILN_CPU_CONV1X1 when it is set to something other than auto, own or onednn.
Status check_conv1x1_flag();

}  // namespace kiln::compiler::cpu
