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

// The least and greatest of the `n` elements at `x` (NaNs left out; +inf and -inf when there are
// none), as two order-preserving ints at `out` (device memory): ordered_to_float turns them back.
// What int8 calibration reads of each activation, without copying it to the host.
Status launch_min_max(Elem e, const void* x, int64_t n, int32_t* out, void* stream);
float ordered_to_float(int32_t v);

}  // namespace kiln::compiler::cuda
