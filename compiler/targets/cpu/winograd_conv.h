// SPDX-License-Identifier: Apache-2.0
// 3x3 convolutions of a batch of one over nChw16c as kiln's own Winograd, F(2x2, 3x3) to 14x14
// and F(4x4, 3x3) past it: the products of the transformed tiles run on the own 1x1 kernel
// (conv1x1.h).
#pragma once

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"

namespace kiln::compiler::cpu {

// Lowers a Conv (3x3, stride 1, padding 1, one group, batch 1, f32 constant weights, input
// channels a multiple of 16, outputs a multiple of 64, no residual Add) with its Relu to a step
// running Winograd on the own 1x1 kernel, where that is faster than oneDNN's Winograd or than the
// 1x1 over taps (auto: from 128 input channels, from 7x7 to 28x28 pixels; ResNet-50's layer-2, 3
// and 4 3x3s) or KILN_CPU_WINOGRAD=own asks for it. false, and nothing added, otherwise.
bool lower_winograd_conv(ProgramBuilder& b, const Node& conv, const Node* add);

// An error naming KILN_CPU_WINOGRAD when it is set to something other than auto, own or onednn.
Status check_winograd_flag();

}  // namespace kiln::compiler::cpu
