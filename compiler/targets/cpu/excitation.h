// SPDX-License-Identifier: Apache-2.0
// Squeeze-and-excitation's two 1x1 convolutions on one pixel as one kiln step (cpu target).
#pragma once

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"

namespace kiln::compiler::cpu {

// Lowers Sigmoid(Conv(SiLU(Conv(x)))) starting at its first convolution `reduce`, where x is f32
// [1, C, 1, 1] (a pooled batch of one) and both convolutions are 1x1 with constant weights: two
// matrix-vector products in one step, on one thread. oneDNN's 1x1 convolution kernels, made for
// many pixels, take 5 to 10 times as long on one pixel as reading the weights does
// (docs/performance.md). Needs AVX-512 (has_fast_silu()); false, and nothing added, otherwise or
// when `reduce` does not start that pattern.
bool lower_excitation(ProgramBuilder& b, const Node& reduce);

}  // namespace kiln::compiler::cpu
