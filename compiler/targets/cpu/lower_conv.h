// SPDX-License-Identifier: Apache-2.0
// Lowering convolutions: kiln's own kernels where they apply and are faster, else oneDNN.
#pragma once

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"

namespace kiln::compiler::cpu {

// Lowers a Conv with its Relu, then the residual Add `add` (may be null) as a sum post-op, then
// the eltwise tail: to the stem, Winograd or 1x1 kernel where one applies and is faster, else to
// a oneDNN convolution. A bf16 Conv runs on oneDNN's bf16 kernels with an f32 bias. false, and
// nothing added, where oneDNN cannot run it.
bool lower_conv(ProgramBuilder& b, const Node& conv, const Node* add);

}  // namespace kiln::compiler::cpu
