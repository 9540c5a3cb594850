// SPDX-License-Identifier: Apache-2.0
// The row kernels: layer normalization and softmax over the last axis, one warp a row for rows
// of up to 1024 elements, one block a row beyond; each on f32, f16 or bf16 tensors, computing
// in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <cstdint>
#include <type_traits>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/rows.h"

namespace kiln::compiler::cuda {

namespace {

__device__ float block_reduce(float v, bool max, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      shared[threadIdx.x] = max ? fmaxf(shared[threadIdx.x], shared[threadIdx.x + s])
                                : shared[threadIdx.x] + shared[threadIdx.x + s];
    }
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, int64_t cols, bool log) {
  __shared__ float shared[kThreads];
  const T* row = x + blockIdx.x * cols;
  T* out = y + blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, ld(row[j]));
  m = block_reduce(m, true, shared);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(ld(row[j]) - m);
  s = block_reduce(s, false, shared);
  const float log_s = logf(s);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = ld(row[j]);
    out[j] = from_f32<T>(log ? v - m - log_s : expf(v - m) / s);
  }
}

template <class T>
__global__ void layernorm_kernel(const T* x, T* y, const float* scale, const float* bias,
                                 int64_t cols, float epsilon) {
  __shared__ float shared[kThreads];
  const T* row = x + blockIdx.x * cols;
  T* out = y + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += ld(row[j]);
  const float mean = block_reduce(s, false, shared) / static_cast<float>(cols);
  float v = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = ld(row[j]) - mean;
    v += d * d;
  }
  const float inv = rsqrtf(block_reduce(v, false, shared) / static_cast<float>(cols) + epsilon);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float r = (ld(row[j]) - mean) * inv * scale[j];
    out[j] = from_f32<T>(bias != nullptr ? r + bias[j] : r);
  }
}

// Rows of at most 1024 elements (a transformer's: 197 or 128 attention scores, 768 features) run
// one warp a row, the row in registers and the reductions warp shuffles: one block a row with
// block-wide reductions ran ViT-B/16's 197-wide attention rows at batch 256 in 1.63 ms on an H200,
// for 0.48 GB of f16 traffic (a tenth of the memory bandwidth).
constexpr int kRowsPerBlock = 4;
constexpr int kMaxWarpRow = 1024;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// A lane's unit u of a row: element u (kW 1) or elements 8u .. 8u + 7 (kW 8, one Pack8: a
// 16-byte load for f16/bf16, two for f32) as f32 in v[0 .. kW).
template <int kW, class T>
__device__ __forceinline__ void load_unit(const T* row, int u, float* v) {
  if constexpr (kW == 8) {
    const Pack8<T> p = reinterpret_cast<const Pack8<T>*>(row)[u];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = ld(p.v[e]);
  } else {
    v[0] = ld(row[u]);
  }
}
template <int kW, class T>
__device__ __forceinline__ void store_unit(T* row, int u, const float* v) {
  if constexpr (kW == 8) {
    Pack8<T> p;
#pragma unroll
    for (int e = 0; e < 8; ++e) p.v[e] = from_f32<T>(v[e]);
    reinterpret_cast<Pack8<T>*>(row)[u] = p;
  } else {
    row[u] = from_f32<T>(v[0]);
  }
}

// This lane's units of a row (u = lane + 32 i) into v, `pad` in the places past its end.
template <int kUnits, int kW, class T>
__device__ __forceinline__ void load_row_units(const T* row, int units, float* v, float pad) {
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int u = static_cast<int>(threadIdx.x) + i * 32;
    if (u < units) {
      load_unit<kW>(row, u, v + i * kW);
    } else {
#pragma unroll
      for (int e = 0; e < kW; ++e) v[i * kW + e] = pad;
    }
  }
}

// Each lane holds units lane, lane + 32, ... (coalesced across the warp) of kW elements each
// (kW 8 where cols % 8 == 0 and the pointers are Pack8-aligned), kPer elements in all.
template <int kPer, int kW, class T>
__global__ void softmax_warp_kernel(const T* x, T* y, int64_t rows, int cols) {
  constexpr int kUnits = (kPer + kW - 1) / kW;
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.y;
  if (row >= rows) return;  // the whole warp: its lanes share the row
  const T* in = x + row * cols;
  T* out = y + row * cols;
  const int units = cols / kW;
  float v[kUnits * kW];
  load_row_units<kUnits, kW>(in, units, v, -FLT_MAX);
  float m = -FLT_MAX;
#pragma unroll
  for (int e = 0; e < kUnits * kW; ++e) m = fmaxf(m, v[e]);
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int u = static_cast<int>(threadIdx.x) + i * 32;
#pragma unroll
    for (int e = 0; e < kW; ++e) {
      float& w = v[i * kW + e];
      w = u < units ? expf(w - m) : 0.0f;
      s += w;
    }
  }
  s = warp_sum(s);
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int u = static_cast<int>(threadIdx.x) + i * 32;
    if (u >= units) continue;
#pragma unroll
    for (int e = 0; e < kW; ++e) v[i * kW + e] /= s;
    store_unit<kW>(out, u, v + i * kW);
  }
}

template <int kPer, int kW, class T>
__global__ void layernorm_warp_kernel(const T* x, T* y, const float* scale, const float* bias,
                                      int64_t rows, int cols, float epsilon) {
  constexpr int kUnits = (kPer + kW - 1) / kW;
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.y;
  if (row >= rows) return;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  const int units = cols / kW;
  float v[kUnits * kW];
  load_row_units<kUnits, kW>(in, units, v, 0.0f);
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kUnits * kW; ++e) s += v[e];
  const float mean = warp_sum(s) / static_cast<float>(cols);
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int u = static_cast<int>(threadIdx.x) + i * 32;
#pragma unroll
    for (int e = 0; e < kW; ++e) {
      const float d = v[i * kW + e] - mean;
      q += u < units ? d * d : 0.0f;
    }
  }
  const float inv = rsqrtf(warp_sum(q) / static_cast<float>(cols) + epsilon);
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int u = static_cast<int>(threadIdx.x) + i * 32;
    if (u >= units) continue;
    float sc[kW], bi[kW];
    load_unit<kW>(scale, u, sc);
    if (bias != nullptr) load_unit<kW>(bias, u, bi);
#pragma unroll
    for (int e = 0; e < kW; ++e) {
      const float r = (v[i * kW + e] - mean) * inv * sc[e];
      v[i * kW + e] = bias != nullptr ? r + bi[e] : r;
    }
    store_unit<kW>(out, u, v + i * kW);
  }
}

// Calls fn(std::integral_constant<int, kPer>{}) with the fewest elements a lane (of 1, 2, 4, 8,
// 12, 16, 24, 32) that cover `cols`, which is at most kMaxWarpRow.
template <class Fn>
void with_row_width(int64_t cols, Fn&& fn) {
  if (cols <= 32) return fn(std::integral_constant<int, 1>{});
  if (cols <= 64) return fn(std::integral_constant<int, 2>{});
  if (cols <= 128) return fn(std::integral_constant<int, 4>{});
  if (cols <= 256) return fn(std::integral_constant<int, 8>{});
  if (cols <= 384) return fn(std::integral_constant<int, 12>{});
  if (cols <= 512) return fn(std::integral_constant<int, 16>{});
  if (cols <= 768) return fn(std::integral_constant<int, 24>{});
  return fn(std::integral_constant<int, 32>{});
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

// Floats as ints whose order is the floats' order (negatives' bits flipped), for atomicMin/Max.
__device__ __forceinline__ int32_t ordered(float v) {
  const int32_t i = __float_as_int(v);
  return i >= 0 ? i : i ^ 0x7fffffff;
}

__global__ void min_max_init_kernel(int32_t* out) {
  out[0] = ordered(__int_as_float(0x7f800000));   // +inf
  out[1] = ordered(__int_as_float(0xff800000));   // -inf
}

// Each block's least and greatest value (NaNs left out) folded into out[0] and out[1].
template <class T>
__global__ void min_max_kernel(const T* x, int64_t n, int32_t* out) {
  __shared__ float shared[kThreads];
  float lo = __int_as_float(0x7f800000);
  float hi = __int_as_float(0xff800000);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = ld(x[i]);
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  }
  hi = block_reduce(hi, true, shared);
  lo = -block_reduce(-lo, true, shared);
  if (threadIdx.x == 0) {
    atomicMin(out, ordered(lo));
    atomicMax(out + 1, ordered(hi));
  }
}

}  // namespace

Status launch_layernorm(Elem e, const void* x, void* y, const float* scale, const float* bias,
                        int64_t rows, int64_t cols, float epsilon, void* stream) {
  if (rows <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    if (cols <= kMaxWarpRow) {
      // 8 elements a unit where the rows and every pointer allow 16-byte packs.
      const bool vec = cols % 8 == 0 && aligned_to(x, sizeof(Pack8<T>)) &&
                       aligned_to(y, sizeof(Pack8<T>)) && aligned_to(scale, sizeof(Pack8<float>)) &&
                       (bias == nullptr || aligned_to(bias, sizeof(Pack8<float>)));
      with_row_width(cols, [&](auto per) {
        auto kernel = vec ? layernorm_warp_kernel<decltype(per)::value, 8, T>
                          : layernorm_warp_kernel<decltype(per)::value, 1, T>;
        kernel<<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, s>>>(
            static_cast<const T*>(x), static_cast<T*>(y), scale, bias, rows, static_cast<int>(cols),
            epsilon);
      });
    } else {
      layernorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
          static_cast<const T*>(x), static_cast<T*>(y), scale, bias, cols, epsilon);
    }
    return launched("layernorm");
  });
}

Status launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                      void* stream) {
  if (rows <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    if (!log && cols <= kMaxWarpRow) {
      const bool vec =
          cols % 8 == 0 && aligned_to(x, sizeof(Pack8<T>)) && aligned_to(y, sizeof(Pack8<T>));
      with_row_width(cols, [&](auto per) {
        auto kernel = vec ? softmax_warp_kernel<decltype(per)::value, 8, T>
                          : softmax_warp_kernel<decltype(per)::value, 1, T>;
        kernel<<<row_blocks(rows), dim3(32, kRowsPerBlock), 0, s>>>(
            static_cast<const T*>(x), static_cast<T*>(y), rows, static_cast<int>(cols));
      });
    } else {
      softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
          static_cast<const T*>(x), static_cast<T*>(y), cols, log);
    }
    return launched("softmax");
  });
}

Status launch_min_max(Elem e, const void* x, int64_t n, int32_t* out, void* stream) {
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    min_max_init_kernel<<<1, 1, 0, s>>>(out);
    if (n > 0) {
      const int64_t blocks = std::min<int64_t>((n + kThreads * 8 - 1) / (kThreads * 8), 1024);
      min_max_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(static_cast<const T*>(x),
                                                                        n, out);
    }
    return launched("min_max");
  });
}

float ordered_to_float(int32_t v) {
  const int32_t i = v >= 0 ? v : v ^ 0x7fffffff;
  float f;
  std::memcpy(&f, &i, sizeof(f));
  return f;
}

}  // namespace kiln::compiler::cuda
