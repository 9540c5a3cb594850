// SPDX-License-Identifier: Apache-2.0
// Squeeze-and-excitation gates a 1x1 convolution absorbs into its weights (cpu target): the
// pattern; squeeze_excite.h makes the step.
#pragma once

#include <optional>

#include "compiler/ir/graph.h"

namespace kiln::compiler::cpu {

// Conv(Mul(x, gate)) where `gate` holds one value per channel of x ([1, C, 1, 1], the sigmoid of
// squeeze-and-excitation): since the convolution is 1x1, it equals Conv(x) with the weights' input
// channels scaled by the gate, which reads x once instead of writing and reading x * gate.
struct ConvGate {
  const Node* mul = nullptr;
  const Value* x = nullptr;
  const Value* gate = nullptr;
};

// The gate `conv` absorbs: `conv` is an f32 1x1 convolution (stride 1, no padding, one group) of
// a batch of one, whose input is only used by it and is a per-channel Mul, and the weights
// (scaled once per run) are small next to the activations (at most half as many output channels
// as pixels). nullopt otherwise.
std::optional<ConvGate> absorbed_gate(const Node& conv);

// Whether `mul` is the gate of the convolution that uses it (absorbed_gate): it is lowered with
// that convolution, not on its own.
bool is_absorbed_gate(const Node& mul);

}  // namespace kiln::compiler::cpu
