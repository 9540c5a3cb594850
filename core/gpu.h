// SPDX-License-Identifier: Apache-2.0
// The NVIDIA GPUs this process can use; empty in a build without CUDA or on a machine without one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct GpuInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
};

// True when this build includes the CUDA parts.
bool built_with_cuda();
// The visible GPUs; empty without CUDA support or without a usable device (never an error: a
// machine without a GPU is a normal case). `why_none` receives the driver's reason when empty.
std::vector<GpuInfo> list_gpus(std::string* why_none = nullptr);

}  // namespace kiln
