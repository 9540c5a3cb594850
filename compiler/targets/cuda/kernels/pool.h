// SPDX-License-Identifier: Apache-2.0
// Launchers of the pooling kernels (pool.cu): 2-D max and average pooling over a window, global
// pooling. Plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// Max or average 2-D pooling over a window.
struct Pool2d : Window2d {
  bool max = true;
  bool count_include_pad = false;
};
Status launch_pool2d(Elem e, const Pool2d& p, const void* x, void* y, void* stream);
// Mean (or max) over the `hw` pixels of each (image, channel) of x ([batch, channels, hw], or
// [batch, hw, channels] when `nhwc`) into y ([batch, channels]).
Status launch_global_pool(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                          int64_t hw, bool nhwc, bool max, void* stream);

}  // namespace kiln::compiler::cuda
