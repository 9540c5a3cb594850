// SPDX-License-Identifier: Apache-2.0
// SiLU (x * sigmoid(x)), sigmoid and the channel means of nChw16c data over f32 buffers in place,
// on AVX-512: what kiln applies after a oneDNN step instead of its swish post-op.
#pragma once

#include <cstddef>

namespace kiln::compiler::cpu {

// Whether silu_f32 runs here (x86 with AVX-512).
bool has_fast_silu();

// x * sigmoid(x) over `n` floats in place, on the OpenMP team (one thread below 8192 floats);
// needs has_fast_silu(). Relative error under 3e-7, and no division: oneDNN's swish post-op
// computes an exp and divides, about twice the vector operations, which cost EfficientNet-B0 at
// batch 1 about 10% more time than this pass over the output (docs/performance.md).
void silu_f32(float* data, size_t n);

// 1 / (1 + exp(-x)) over `n` floats in place, on the calling thread, as accurate as silu_f32;
// needs has_fast_silu().
void sigmoid_f32(float* data, size_t n);

// The mean of each channel (GlobalAveragePool) of `blocks` blocks of `pixels` x 16 floats at
// `data` (nChw16c: channel block after channel block), first applying silu_f32 to them in place
// when `silu`, in one pass; the 16 means of block b go to pooled[16 b ...] (nChw16c [N, C, 1, 1]).
// On the OpenMP team (one thread below 8192 floats); needs has_fast_silu().
void pool16_f32(float* data, size_t blocks, size_t pixels, bool silu, float* pooled);

}  // namespace kiln::compiler::cpu
