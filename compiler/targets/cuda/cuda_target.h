// SPDX-License-Identifier: Apache-2.0
// The cuda target: static-shape graphs lowered to device steps (cuDNN, cuBLASLt, own kernels) over
// one device arena; ops without a device kernel run their ref kernels on the host.
#pragma once

#include <memory>

#include "compiler/targets/target.h"

namespace kiln::compiler {

class ShapeProfiles;
namespace cuda {
class Program;
}

// The cuda target, or kUnavailable saying why not (no GPU found, driver error).
Result<std::unique_ptr<Target>> make_cuda_target();

// The GPU count, and cudaSetDevice with its errors as a Status (use_device's cuda part).
int cuda_device_count();
Result<int> cuda_use_device(int device);

// The planned program a cuda executable runs; nullptr when its graph runs on the ref interpreter
// (dynamic shapes, subgraphs) or for another target's executable.
const cuda::Program* cuda_program(const Executable& executable);
// The programs compiled per input shape of a cuda executable whose graph has dynamic input dims;
// nullptr for any other.
const ShapeProfiles* cuda_shape_profiles(const Executable& executable);

}  // namespace kiln::compiler
