// SPDX-License-Identifier: Apache-2.0
// Launcher of the fused attention kernel (attention.cu): plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// The head dims the fused attention kernel is built for.
inline constexpr int64_t kAttentionHeadDim = 64;
// Its operands' strides and offsets are multiples of this many elements (16-byte loads).
inline constexpr int64_t kAttentionAlign = 8;

// One operand of the fused attention: element (batch i, head j, row s, d) of the logical
// [batches, heads, rows, head_dim] tensor is at base + i * batch + j * head + s * row + d
// (elements; the head dim is contiguous).
struct AttentionOperand {
  const void* base = nullptr;
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;
};

// o = softmax(scale * q kᵀ) v for each (batch, head): q and o `queries` rows, k and v `keys`
// rows, each of kAttentionHeadDim elements of type `e` (f16 or bf16; tensor cores, f32
// accumulation, online softmax in f32). Strides and offsets must be multiples of
// kAttentionAlign elements, the bases 16-byte aligned.
Status launch_attention(Elem e, const AttentionOperand& q, const AttentionOperand& k,
                        const AttentionOperand& v, const AttentionOperand& o, int64_t batches,
                        int64_t heads, int64_t queries, int64_t keys, float scale, void* stream);

}  // namespace kiln::compiler::cuda
