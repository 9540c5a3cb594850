// SPDX-License-Identifier: Apache-2.0
// Lowering 1x1 convolutions of a batch of one over nChw16c to kiln's own kernel
// (kernels/conv1x1.h).
#pragma once

#include <cstdint>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/kernels/conv1x1.h"

namespace kiln::compiler::cpu {

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
