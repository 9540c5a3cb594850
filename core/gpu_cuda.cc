// SPDX-License-Identifier: Apache-2.0
// GPU discovery through the CUDA runtime.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

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

Result<std::shared_ptr<void>> gpu_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return unavailable_error(
        fmt::format("allocating {} bytes on the GPU: {}", bytes, cudaGetErrorString(err)));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

namespace {
Status copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, kind);
  if (err == cudaSuccess) return Status();
  cudaGetLastError();
  return unavailable_error(fmt::format("{} {} bytes: {}", what, bytes, cudaGetErrorString(err)));
}
}  // namespace

Status gpu_upload(void* device, const void* host, size_t bytes) {
  return copy(device, host, bytes, cudaMemcpyHostToDevice, "copying to the GPU");
}

Status gpu_download(void* host, const void* device, size_t bytes) {
  return copy(host, device, bytes, cudaMemcpyDeviceToHost, "copying from the GPU");
}

}  // namespace kiln
