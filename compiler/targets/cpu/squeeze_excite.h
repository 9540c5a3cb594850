// SPDX-License-Identifier: Apache-2.0
// Squeeze-and-excitation gates folded into the 1x1 convolution after them (cpu target).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/conv_gate.h"

namespace kiln::compiler::cpu {

// Wraps the convolution step `conv` (reading its weights from buffer `scaled`, in layout `packed`)
// so that each run first writes `weights` (plain, the ONNX layout), packed, with every input
// channel scaled by the gate's value. The gate is read from its buffer in its own layout.
std::unique_ptr<Step> gate_weights(ProgramBuilder& b, const ConvGate& gate,
                                   const dnnl::memory::desc& user_weights, const void* weights,
                                   const dnnl::memory::desc& packed, int scaled,
                                   std::unique_ptr<Step> conv);

}  // namespace kiln::compiler::cpu
