// SPDX-License-Identifier: Apache-2.0
// Fused attention, flash-attention style: one block per (64 query rows, batch, head) streams the
// keys and values through shared memory in tiles of 64 (cp.async, double buffered), computes the
// scores and P·V on tensor cores (mma.sync m16n8k16, f32 accumulation) with the softmax online in
// f32, and writes its rows of the output through their strides.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "compiler/targets/cuda/kernels/attention.h"
#include "compiler/targets/cuda/kernels/common.cuh"
#include "core/env.h"

namespace kiln::compiler::cuda {
namespace {

constexpr int kD = static_cast<int>(kAttentionHeadDim);
constexpr int kRows = 64;        // query rows per block, 16 per warp
constexpr int kKeys = 64;        // keys per tile
constexpr int kBlock = 128;      // 4 warps
constexpr int kPitch = kD + 8;   // shared row pitch: ldmatrix rows hit distinct banks
constexpr int kChunks = kD / 8;  // 16-byte chunks per row
constexpr int kLoads = kRows * kChunks / kBlock;  // chunks each thread loads per tile

struct Operand {
  const void* base;
  int64_t batch, head, row;
};

struct Args {
  Operand q, k, v, o;
  int heads, queries, keys;
  float scale_log2;  // scale * log2(e): the softmax runs on exp2
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, or zeros when `valid` is false.
__device__ __forceinline__ void copy16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix4_trans(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c (16x8, f32) += a (16x16) b (16x8).
template <class T>
__device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two f32 values as one register of two T.
template <class T>
__device__ __forceinline__ uint32_t pack(float x, float y) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(x, y);
    memcpy(&r, &h, 4);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    memcpy(&r, &h, 4);
  }
  return r;
}

// Rows [first, first + kRows) of `src` (rows `stride` elements apart) into `dst`; rows at or past
// `limit` are zeros.
template <class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t stride, int first,
                                          int limit) {
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kBlock;
    const int r = c / kChunks;
    const int ch = c % kChunks;
    const bool valid = first + r < limit;
    copy16(dst + r * kPitch + ch * 8, valid ? src + (first + r) * stride + ch * 8 : src, valid);
  }
}

// `MinBlocks` resident blocks per SM bound the registers: 3 leave 168 a thread, 4 cap them at 128.
template <class T, int MinBlocks>
__global__ void __launch_bounds__(kBlock, MinBlocks) attention_kernel(Args a) {
  __shared__ alignas(16) T sq[kRows * kPitch];
  __shared__ alignas(16) T sk[2][kKeys * kPitch];
  __shared__ alignas(16) T sv[2][kKeys * kPitch];
  const int zb = static_cast<int>(blockIdx.x) / a.heads;
  const int zh = static_cast<int>(blockIdx.x) % a.heads;
  const int q0 = static_cast<int>(blockIdx.y) * kRows;
  auto at = [&](const Operand& p) {
    return static_cast<const T*>(p.base) + zb * p.batch + zh * p.head;
  };
  const T* q = at(a.q);
  const T* k = at(a.k);
  const T* v = at(a.v);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int g = lane / 4;  // the fragment row of this thread (and g + 8)
  const int t = lane % 4;  // its column pair

  load_tile(sq, q, a.q.row, q0, a.queries);
  load_tile(sk[0], k, a.k.row, 0, a.keys);
  load_tile(sv[0], v, a.v.row, 0, a.keys);
  commit();

  const bool active = q0 + warp * 16 < a.queries;  // a warp past the last row only loads
  const int tiles = (a.keys + kKeys - 1) / kKeys;
  uint32_t qf[kD / 16][4];
  float o[kD / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY};  // running row maxima, scaled to log2 units
  float l[2] = {0.0f, 0.0f};            // this thread's part of the row sums
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      load_tile(sk[(j + 1) & 1], k, a.k.row, (j + 1) * kKeys, a.keys);
      load_tile(sv[(j + 1) & 1], v, a.v.row, (j + 1) * kKeys, a.keys);
      commit();
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    if (active) {
      if (j == 0) {
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
          ldmatrix4(qf[kk], sq + (warp * 16 + (lane & 15)) * kPitch + kk * 16 + (lane >> 4) * 8);
        }
      }
      // Scores of the warp's 16 rows against the tile's 64 keys.
      float s[kKeys / 8][4] = {};
      const T* kt = sk[j & 1];
      const int key0 = j * kKeys;
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; n += 2) {
          if (key0 + n * 8 >= a.keys) break;  // keys past the last: left to the mask below
          uint32_t b[4];
          ldmatrix4(b, kt + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * kPitch + kk * 16 +
                           ((lane >> 3) & 1) * 8);
          mma<T>(s[n], qf[kk], b[0], b[1]);
          mma<T>(s[n + 1], qf[kk], b[2], b[3]);
        }
      }
      if (key0 + kKeys > a.keys) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (key0 + n * 8 + 2 * t + (e & 1) >= a.keys) s[n][e] = -INFINITY;
          }
        }
      }
      // Online softmax: rescale what was summed so far to the new maxima.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m[r];
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
          mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]) * a.scale_log2);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float corr = exp2f(m[r] - mx);
        m[r] = mx;
        l[r] *= corr;
#pragma unroll
        for (int dn = 0; dn < kD / 8; ++dn) {
          o[dn][2 * r] *= corr;
          o[dn][2 * r + 1] *= corr;
        }
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            s[n][e] = exp2f(s[n][e] * a.scale_log2 - mx);
            l[r] += s[n][e];
          }
        }
      }
      // o += P V, P straight from the score registers (their layout is mma's A fragment's).
      const T* vt = sv[j & 1];
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        if (key0 + kk * 16 >= a.keys) break;  // their probabilities are 0
        const uint32_t p[4] = {pack<T>(s[2 * kk][0], s[2 * kk][1]),
                               pack<T>(s[2 * kk][2], s[2 * kk][3]),
                               pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dn = 0; dn < kD / 8; dn += 2) {
          uint32_t b[4];
          ldmatrix4_trans(b, vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kPitch + dn * 8 +
                                 (lane >> 4) * 8);
          mma<T>(o[dn], p, b[0], b[1]);
          mma<T>(o[dn + 1], p, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }
  // Normalize into the (now unused) query tile, then store whole rows 16 bytes at a time.
  if (active) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      T* row = sq + (warp * 16 + g + 8 * r) * kPitch + 2 * t;
#pragma unroll
      for (int dn = 0; dn < kD / 8; ++dn) {
        *reinterpret_cast<uint32_t*>(row + dn * 8) =
            pack<T>(o[dn][2 * r] * inv, o[dn][2 * r + 1] * inv);
      }
    }
  }
  __syncthreads();
  T* out = static_cast<T*>(const_cast<void*>(a.o.base)) + zb * a.o.batch + zh * a.o.head;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kBlock;
    const int r = c / kChunks;
    const int ch = c % kChunks;
    if (q0 + r < a.queries) {
      *reinterpret_cast<uint4*>(out + (q0 + r) * a.o.row + ch * 8) =
          *reinterpret_cast<const uint4*>(sq + r * kPitch + ch * 8);
    }
  }
}

}  // namespace

Status launch_attention(Elem e, const AttentionOperand& q, const AttentionOperand& k,
                        const AttentionOperand& v, const AttentionOperand& o, int64_t batches,
                        int64_t heads, int64_t queries, int64_t keys, float scale, void* stream) {
  if (e == Elem::kF32)
    return invalid_argument_error("fused attention: f32 operands (f16/bf16 only)");
  if (batches * heads > 0x7fffffff || queries > 0x7fffffff || keys > 0x7fffffff) {
    return invalid_argument_error("fused attention: dims past 2^31");
  }
  if (batches == 0 || heads == 0 || queries == 0) return Status();
  auto op = [](const AttentionOperand& x) { return Operand{x.base, x.batch, x.head, x.row}; };
  Args a{op(q),
         op(k),
         op(v),
         op(o),
         static_cast<int>(heads),
         static_cast<int>(queries),
         static_cast<int>(keys),
         scale * 1.4426950408889634f};
  const dim3 grid(static_cast<unsigned>(batches * heads),
                  static_cast<unsigned>((queries + kRows - 1) / kRows));
  auto s = static_cast<cudaStream_t>(stream);
  static const bool four = [] {
    const char* env = env_flag_c_str(EnvFlag::kCudaAttentionBlocks);
    return env != nullptr && std::strcmp(env, "4") == 0;
  }();
  if (e == Elem::kF16) {
    (four ? attention_kernel<__half, 4> : attention_kernel<__half, 1>)<<<grid, kBlock, 0, s>>>(a);
  } else {
    (four ? attention_kernel<__nv_bfloat16, 4>
          : attention_kernel<__nv_bfloat16, 1>)<<<grid, kBlock, 0, s>>>(a);
  }
  return launched("attention");
}

}  // namespace kiln::compiler::cuda
