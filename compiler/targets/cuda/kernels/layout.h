// SPDX-License-Identifier: Apache-2.0
// Launchers of the layout kernels (layout.cu): channel padding into NHWC and strided copies
// (transposes, slices, NCHW/NHWC reorders). Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// y, NHWC [batch, hw, padded], from x ([batch, channels, hw], or [batch, hw, channels] when
// `x_nhwc`) with channels widened to `padded`, the new ones zero: the input of a convolution whose
// channel count tensor cores cannot take as it is (an image's 3).
Status launch_pad_channels(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                           int64_t hw, int64_t padded, bool x_nhwc, void* stream);
// y (dims `out_dims`) from x read at `in_strides` per output dim: transposes and strided copies of
// any element size (1, 2, 4 or 8 bytes).
Status launch_permute(const void* x, void* y, int64_t n, int rank, const int64_t* out_dims,
                      const int64_t* in_strides, int element_bytes, void* stream);

}  // namespace kiln::compiler::cuda
