// SPDX-License-Identifier: Apache-2.0
// What the cuda target's kernel files (kernels/*.cu) share: launch geometry, the launch check, f32
// loads and stores of each element type, the dispatch on it, grid-stride loops, index widths and
// 16-byte vectors. Device code: included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "compiler/targets/cuda/kernels/types.h"
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

// A conv epilogue's activation: the clamp (ReLU, ReLU6, none), then SiLU (v * sigmoid(v)) if asked.
__device__ __forceinline__ float clamp_act(float v, float lo, float hi, bool silu) {
  v = fminf(fmaxf(v, lo), hi);
  return silu ? v / (1.0f + __expf(-v)) : v;
}

// Calls fn(T{}) with T the element type of `e`.
template <class Fn>
Status dispatch(Elem e, Fn&& fn) {
  switch (e) {
    case Elem::kF32: return fn(float{});
    case Elem::kF16: return fn(__half{});
    case Elem::kBF16: return fn(__nv_bfloat16{});
  }
  return invalid_argument_error("cuda kernel: unknown element type");
}

#define KILN_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

// The same loop over an index of type I: the kernels that divide indices run on 32-bit ones when
// every index fits (fits_32()), 64-bit division costing several times more instructions.
#define KILN_GRID_STRIDE_T(I, i, n) \
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < I(n); i += I(blockDim.x) * gridDim.x)

// Whether indices and offsets up to `reach` in magnitude (and the grid's stride, at most 2^28, past
// them) fit a signed 32-bit index.
inline bool fits_32(int64_t reach) {
  return reach < (int64_t{1} << 30);
}

// The largest magnitude of an offset through `rank` dims of `dims` at `strides` (negative strides
// of reversed slices too), at least `n`.
inline int64_t reach_of(int64_t n, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t sum = 0;
  for (int d = 0; d < rank; ++d) sum += (dims[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
  return std::max(n, sum);
}

// 8 elements: one 16-byte load or store of f16/bf16, two of f32.
template <class T>
struct alignas(sizeof(T) * 8) Pack8 {
  T v[8];
};

// 16 bytes of elements: what one thread loads and stores at once in the vectorized kernels.
template <class T>
struct alignas(16) Vec {
  static constexpr int kLanes = 16 / static_cast<int>(sizeof(T));
  T v[kLanes];
};

template <class T>
bool aligned16(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
// Whether `p` is a multiple of `bytes` (a power of two).
inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace
}  // namespace kiln::compiler::cuda
