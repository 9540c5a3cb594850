// SPDX-License-Identifier: Apache-2.0
// What the cuda target's kernel files (kernels.cu, quantized_kernels.cu) share: launch geometry,
// the launch check, and f32 loads and stores of each element type. Device code: included only
// by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kiln::compiler::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

Status launched(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status();
  return unavailable_error(std::string("cuda kernel ") + kernel + ": " + cudaGetErrorString(err));
}

// Loads as f32 and stores from f32, for each element type.
__device__ __forceinline__ float ld(float v) {
  return v;
}
__device__ __forceinline__ float ld(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float ld(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace
}  // namespace kiln::compiler::cuda
