// SPDX-License-Identifier: Apache-2.0
// Kernels for the nodes the ref interpreter runs on the cpu target (a graph it cannot plan as a
// whole, and the ref steps of one it can): the node alone, lowered to a Program by the rules that
// lower any graph (dnnl_steps.cc), so that oneDNN is reached one way only.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>

#include "compiler/ir/graph.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler::cpu {

// The kernel of `node`: a program of the node alone over its static input and output shapes, run
// where the interpreter's inputs have them (else the node's ref kernel runs). nullptr where the
// node's shapes are not static or the program would be only the ref kernel itself. Weights packed
// for it go where pack() puts them on this thread (a PackInto scope).
std::unique_ptr<ref::NodeKernel> make_node_kernel(const Node& node, const dnnl::engine& engine,
                                                  uint64_t seed);

}  // namespace kiln::compiler::cpu
