// SPDX-License-Identifier: Apache-2.0
// The cpu target: the ref interpreter's walk with oneDNN kernels for the nodes oneDNN can run.
#pragma once

#include <memory>

#include "compiler/targets/target.h"

namespace kiln::compiler {

std::unique_ptr<Target> make_cpu_target();

// How many nodes of a cpu executable run oneDNN kernels (the others run their ref kernels);
// -1 for an executable of another target.
int cpu_dnnl_node_count(const Executable& executable);

}  // namespace kiln::compiler
