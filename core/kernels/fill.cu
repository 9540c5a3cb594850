// SPDX-License-Identifier: Apache-2.0
// A grid-stride fill kernel: the smallest device code, used to zero arenas and to check that the
// CUDA toolchain and device work end to end.
#include <cuda_runtime.h>

#include <string>

#include "core/kernels/fill.h"

namespace kiln::kernels {

namespace {
__global__ void fill_f32_kernel(float* dst, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    dst[i] = value;
  }
}
}  // namespace

Status fill_f32_cuda(float* dst, int64_t count, float value) {
  if (count <= 0) return Status();
  const int threads = 256;
  const int64_t blocks = (count + threads - 1) / threads;
  fill_f32_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads>>>(dst, count,
                                                                                       value);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    return unavailable_error(std::string("fill_f32_cuda: ") + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace kiln::kernels
