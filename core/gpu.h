// SPDX-License-Identifier: Apache-2.0
// The NVIDIA GPUs this process can use; empty in a build without CUDA or on a machine without one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

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

// `bytes` of memory on the current GPU (cudaMalloc), freed when the last reference goes; an error
// without CUDA or when the GPU has too little free.
Result<std::shared_ptr<void>> gpu_alloc(size_t bytes);
// Synchronous copies between host memory and GPU memory.
Status gpu_upload(void* device, const void* host, size_t bytes);
Status gpu_download(void* host, const void* device, size_t bytes);

}  // namespace kiln
