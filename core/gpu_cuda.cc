// SPDX-License-Identifier: Apache-2.0
// GPU discovery through the CUDA runtime.
#include <cuda_runtime_api.h>

#include "core/gpu.h"

namespace kiln {

bool built_with_cuda() {
  return true;
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_none) *why_none = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return {};
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    gpus.push_back({i, prop.name, prop.major, prop.minor, static_cast<int64_t>(prop.totalGlobalMem),
                    prop.multiProcessorCount});
  }
  return gpus;
}

}  // namespace kiln
