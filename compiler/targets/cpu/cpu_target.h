// SPDX-License-Identifier: Apache-2.0
// The cpu target: the ref interpreter's walk with oneDNN kernels for the nodes oneDNN can run.
#pragma once

#include <memory>

#include "compiler/targets/target.h"

namespace kiln::compiler {

namespace cpu {
class Program;
}
class ShapeProfiles;

std::unique_ptr<Target> make_cpu_target();

// How many nodes of a cpu executable run oneDNN kernels (the others run their ref kernels);
// -1 for an executable of another target.
int cpu_dnnl_node_count(const Executable& executable);

// The planned program a cpu executable runs; nullptr when the interpreter runs its graph (dynamic
// shapes, subgraphs, KILN_CPU_INTERPRET=1) or for another target's executable.
const cpu::Program* cpu_program(const Executable& executable);

// The threads a run of an executable of `threads` threads takes on a machine of `cores` cores
// where `runnable` threads are runnable (/proc/loadavg's fourth field, this run's own among them):
// one when the others leave no core free for a second, else `threads` (KILN_CPU_BUSY_THREADS).
int threads_on_busy_machine(int threads, int cores, long runnable);

// The per-shape programs of a cpu executable whose graph has dynamic input dims (each input shape
// it runs with is compiled once, on first sight); nullptr otherwise.
const ShapeProfiles* cpu_shape_profiles(const Executable& executable);

}  // namespace kiln::compiler
