// SPDX-License-Identifier: Apache-2.0
// Launchers of the row kernels (rows.cu): layer normalization and softmax over the last axis.
// Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// Layer normalization over the last `cols` elements of each of `rows` rows (f32 statistics):
// y = (x - mean) / sqrt(var + epsilon) * scale + bias; bias may be null.
Status launch_layernorm(Elem e, const void* x, void* y, const float* scale, const float* bias,
                        int64_t rows, int64_t cols, float epsilon, void* stream);
// Softmax (or log-softmax) over the last `cols` elements of each of `rows` rows.
Status launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                      void* stream);

}  // namespace kiln::compiler::cuda
