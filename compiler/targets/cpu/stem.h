// SPDX-License-Identifier: Apache-2.0
// Lowering a network's first convolution of a batch of one, with its activation and MaxPool, to
// kiln's own kernel (kernels/stem.h).
#pragma once

#include <cstdint>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/kernels/stem.h"

namespace kiln::compiler::cpu {

// Lowers a Conv of a batch of one from a plain (NCHW) input of at most 4 channels with its Relu,
// Clip or SiLU, and the MaxPool that is its output's only reader, to one step running stem_conv_f32
// (output NHWC, or nChw16c in channel-blocked programs). false, and nothing added, where it does
// not apply or KILN_CPU_STEM=onednn.
bool lower_stem(ProgramBuilder& b, const Node& conv);

// An error naming KILN_CPU_STEM when it is set to something other than auto or onednn.
Status check_stem_flag();

}  // namespace kiln::compiler::cpu
