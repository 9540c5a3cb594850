// SPDX-License-Identifier: Apache-2.0
// Steps that apply kiln's SiLU or channel-mean kernels (kernels/silu.h) after a oneDNN step
// instead of as its swish post-op or a pooling step of its own.
#pragma once

#include <cstddef>
#include <memory>

#include "compiler/targets/cpu/kernels/silu.h"
#include "compiler/targets/cpu/program.h"

namespace kiln::compiler::cpu {

// Wraps `step` so that each run applies silu_f32 over the first `elements` floats of buffer
// `dst` after it: the step then computes what it would with a trailing swish post-op.
std::unique_ptr<Step> silu_after(std::unique_ptr<Step> step, int dst, size_t elements);

// Wraps `step` so that each run then applies pool16_f32 to buffer `dst` (as above), writing
// buffer `pooled`: a GlobalAveragePool of the step's output computed while SiLU reads it anyway
// (or in the same OpenMP region otherwise), instead of a pooling step's own pass and region.
std::unique_ptr<Step> pool_after(std::unique_ptr<Step> step, int dst, size_t blocks, size_t pixels,
                                 bool silu, int pooled);

}  // namespace kiln::compiler::cpu
