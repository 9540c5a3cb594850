// SPDX-License-Identifier: Apache-2.0
// The own convolution kernel for few input channels (conv_mma.h): each warp computes tiles of 16
// or 32 output pixels by all output channels as an implicit GEMM on mma.sync.m16n8k16 (f16/bf16
// operands, f32 accumulation). The A fragments are gathered from the input through a table of the
// reduction index's offsets (so the stem reads the NCHW image as it is, with no padded NHWC
// copy), the filter sits in shared memory, and the accumulators go through a shared-memory tile
// so each lane writes 16 contiguous bytes of the NHWC output after the bias, residual and clamp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/conv_mma.h"

namespace kiln::compiler::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDepth = 256;
constexpr int kMaxChannels = 128;
constexpr int kMaxSharedBytes = 160 * 1024;

// The geometry in 32-bit ints (conv_mma_supported keeps every offset within them).
struct MmaArgs {
  int c, h, w, k, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int depth;     // c * kh * kw
  int kp;        // depth rounded up to 16
  int ldw;       // 32-bit words per filter row in shared memory (kp / 2 + 4: no bank conflicts)
  int stage_ld;  // floats per staged row (k + pad, = 8 mod 32: conflict-free float2 stores)
  int filter_bytes;
  int pixels;
  int tiles;
  float lo, hi;
  bool silu, x_nhwc, pairs;
};

// Output pixels a warp computes per tile, in 16-row blocks: two when the accumulators allow.
__host__ __device__ constexpr int rows_for(int nt) {
  return nt <= 8 ? 2 : 1;
}

int stage_ld(int64_t k) {
  return static_cast<int>(k + (8 - k % 32 + 32) % 32);
}

int64_t filter_bytes(int64_t k, int64_t kp) {
  return (k * (kp + 8) * 2 + 15) / 16 * 16;
}

int64_t shared_bytes(int64_t k, int64_t kp) {
  const int mt = rows_for(static_cast<int>(k / 8));
  return filter_bytes(k, kp) + kp * 8 + int64_t{kWarps} * mt * 16 * stage_ld(k) * 4;
}

template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One input element (as bits) at reduction entry `t` (offset, window row << 16 | column) of a
// pixel whose window starts at (ih0, iw0), `base` its offset; 0 outside the input.
__device__ __forceinline__ uint32_t gather1(const uint16_t* x, const MmaArgs& p, int2 t, int base,
                                            int ih0, int iw0) {
  const int ih = ih0 + (t.y >> 16);
  const int iw = iw0 + (t.y & 0xffff);
  const bool in = static_cast<unsigned>(ih) < static_cast<unsigned>(p.h) &&
                  static_cast<unsigned>(iw) < static_cast<unsigned>(p.w);
  return in ? __ldg(x + base + t.x) : 0u;
}

// The same for two neighbouring channels of one pixel (NHWC, an even channel count): one load.
__device__ __forceinline__ uint32_t gather2(const uint16_t* x, const MmaArgs& p, int2 t, int base,
                                            int ih0, int iw0) {
  const int ih = ih0 + (t.y >> 16);
  const int iw = iw0 + (t.y & 0xffff);
  const bool in = static_cast<unsigned>(ih) < static_cast<unsigned>(p.h) &&
                  static_cast<unsigned>(iw) < static_cast<unsigned>(p.w);
  return in ? __ldg(reinterpret_cast<const unsigned int*>(x + base + t.x)) : 0u;
}

template <class T, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    conv_mma_kernel(MmaArgs p, const uint16_t* __restrict__ x, const uint32_t* __restrict__ weight,
                    const float* __restrict__ bias, const T* __restrict__ residual,
                    T* __restrict__ y) {
  constexpr int kM = rows_for(NT);
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* bs = reinterpret_cast<uint32_t*>(smem);
  int2* table = reinterpret_cast<int2*>(smem + p.filter_bytes);
  float* stage = reinterpret_cast<float*>(table + p.kp);

  const int words = p.kp / 2;
  for (int i = threadIdx.x; i < p.k * words; i += blockDim.x) {
    bs[(i / words) * p.ldw + i % words] = weight[i];
  }
  const int taps = p.kh * p.kw;
  for (int r = threadIdx.x; r < p.kp; r += blockDim.x) {
    int2 t = make_int2(0, 0x40000000);  // past the reduction: a window row no input has
    if (r < p.depth) {
      const int ci = p.x_nhwc ? r % p.c : r / taps;
      const int tap = p.x_nhwc ? r / p.c : r % taps;
      const int di = tap / p.kw * p.dh;
      const int dj = tap % p.kw * p.dw;
      t.x = p.x_nhwc ? (di * p.w + dj) * p.c + ci : (ci * p.h + di) * p.w + dj;
      t.y = (di << 16) | dj;
    }
    table[r] = t;
  }
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int g = lane / 4;
  const int q = lane % 4;
  float* st = stage + warp * kM * 16 * p.stage_ld;
  const int ohw = p.oh * p.ow;
  const int vecs = p.k / 8;
  for (int tile = blockIdx.x * kWarps + warp; tile < p.tiles; tile += gridDim.x * kWarps) {
    const int p0 = tile * kM * 16;
    int base[kM][2], ih0[kM][2], iw0[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int pix = p0 + m * 16 + hh * 8 + g;
        const int at = min(pix, p.pixels - 1);
        const int img = at / ohw;
        const int rem = at % ohw;
        const int iy = rem / p.ow * p.sh - p.ph;
        const int ix = rem % p.ow * p.sw - p.pw;
        base[m][hh] =
            p.x_nhwc ? ((img * p.h + iy) * p.w + ix) * p.c : (img * p.c * p.h + iy) * p.w + ix;
        ih0[m][hh] = pix < p.pixels ? iy : -0x40000000;  // a row past the end reads nothing
        iw0[m][hh] = ix;
      }
    }
    float acc[kM][NT][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;
      }
    }
    for (int kt = 0; kt < p.kp / 16; ++kt) {
      const int r0 = kt * 16 + q * 2;
      const int2 t[4] = {table[r0], table[r0 + 1], table[r0 + 8], table[r0 + 9]};
      uint32_t a[kM][4];
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int b = base[m][hh];
            const int i0 = ih0[m][hh];
            const int j0 = iw0[m][hh];
            a[m][hh + 2 * j] = p.pairs ? gather2(x, p, t[2 * j], b, i0, j0)
                                       : gather1(x, p, t[2 * j], b, i0, j0) |
                                             (gather1(x, p, t[2 * j + 1], b, i0, j0) << 16);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint32_t* row = bs + (nt * 8 + g) * p.ldw + kt * 8 + q;
        const uint32_t b0 = row[0];
        const uint32_t b1 = row[4];
#pragma unroll
        for (int m = 0; m < kM; ++m) mma16816<T>(acc[m][nt], a[m], b0, b1);
      }
    }
    // Accumulators (row g and g + 8 of each 16, columns 2q, 2q + 1 of each 8) to the tile.
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float* at = st + (m * 16 + g) * p.stage_ld + nt * 8 + q * 2;
        *reinterpret_cast<float2*>(at) = make_float2(acc[m][nt][0], acc[m][nt][1]);
        *reinterpret_cast<float2*>(at + 8 * p.stage_ld) = make_float2(acc[m][nt][2], acc[m][nt][3]);
      }
    }
    __syncwarp();
    // The tile's pixels are contiguous in the NHWC output: 8 channels (16 bytes) a lane.
    for (int v = lane; v < kM * 16 * vecs; v += 32) {
      const int row = v / vecs;
      const int c0 = v % vecs * 8;
      const int pix = p0 + row;
      if (pix >= p.pixels) continue;
      const float* src = st + row * p.stage_ld + c0;
      const float4 s0 = *reinterpret_cast<const float4*>(src);
      const float4 s1 = *reinterpret_cast<const float4*>(src + 4);
      float o[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
      if (bias != nullptr) {
        const float4 b0 = __ldg(reinterpret_cast<const float4*>(bias + c0));
        const float4 b1 = __ldg(reinterpret_cast<const float4*>(bias + c0 + 4));
        o[0] += b0.x, o[1] += b0.y, o[2] += b0.z, o[3] += b0.w;
        o[4] += b1.x, o[5] += b1.y, o[6] += b1.z, o[7] += b1.w;
      }
      const int64_t off = static_cast<int64_t>(pix) * p.k + c0;
      if (residual != nullptr) {
        const uint4 zv = __ldg(reinterpret_cast<const uint4*>(residual + off));
        const T* z = reinterpret_cast<const T*>(&zv);
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] += ld(z[i]);
      }
      uint4 out;
      T* ot = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        float v8 = fminf(fmaxf(o[i], p.lo), p.hi);
        if (p.silu) v8 = v8 / (1.0f + __expf(-v8));
        ot[i] = from_f32<T>(v8);
      }
      *reinterpret_cast<uint4*>(y + off) = out;
    }
    __syncwarp();
  }
}

// The current device's multiprocessor count (0 when it cannot be read).
int sm_count() {
  int device = 0;
  int n = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

template <class T, int NT>
Status launch_nt(const MmaArgs& a, int64_t smem, const void* x, const void* weight,
                 const float* bias, const void* residual, void* y, cudaStream_t s) {
  auto kernel = conv_mma_kernel<T, NT>;
  // Blocks of more than the default 48 KB of shared memory (set on the current device; a host
  // call, not queued, so a captured graph replays without it).
  if (smem > 48 * 1024) {
    const cudaError_t raised = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (raised != cudaSuccess) {
      return unavailable_error(std::string("cuda kernel conv_mma: ") + cudaGetErrorString(raised));
    }
  }
  // One wave of resident blocks (a partial second wave cost a third of the time), each warp
  // taking tiles in turn.
  int resident = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kWarps * 32,
                                                    static_cast<size_t>(smem)) != cudaSuccess ||
      resident < 1) {
    cudaGetLastError();
    resident = 1;
  }
  const int64_t blocks = std::min<int64_t>((int64_t{a.tiles} + kWarps - 1) / kWarps,
                                           int64_t{std::max(sm_count(), 1)} * resident);
  kernel<<<static_cast<unsigned>(std::max<int64_t>(blocks, 1)), kWarps * 32,
           static_cast<size_t>(smem), s>>>(a, static_cast<const uint16_t*>(x),
                                           static_cast<const uint32_t*>(weight), bias,
                                           static_cast<const T*>(residual), static_cast<T*>(y));
  return launched("conv_mma");
}

template <class T>
Status launch_typed(const MmaArgs& a, int64_t smem, const void* x, const void* weight,
                    const float* bias, const void* residual, void* y, cudaStream_t s) {
  switch (a.k / 8) {
#define KILN_CONV_MMA_CASE(nt) \
  case nt: return launch_nt<T, nt>(a, smem, x, weight, bias, residual, y, s);
    KILN_CONV_MMA_CASE(1)
    KILN_CONV_MMA_CASE(2)
    KILN_CONV_MMA_CASE(3)
    KILN_CONV_MMA_CASE(4)
    KILN_CONV_MMA_CASE(5)
    KILN_CONV_MMA_CASE(6)
    KILN_CONV_MMA_CASE(7)
    KILN_CONV_MMA_CASE(8)
    KILN_CONV_MMA_CASE(9)
    KILN_CONV_MMA_CASE(10)
    KILN_CONV_MMA_CASE(11)
    KILN_CONV_MMA_CASE(12)
    KILN_CONV_MMA_CASE(13)
    KILN_CONV_MMA_CASE(14)
    KILN_CONV_MMA_CASE(15)
    KILN_CONV_MMA_CASE(16)
#undef KILN_CONV_MMA_CASE
    default: return unavailable_error("cuda kernel conv_mma: output channels not supported");
  }
}

}  // namespace

int64_t conv_mma_depth(const ConvMma& p) {
  return (p.c * p.kh * p.kw + 15) / 16 * 16;
}

bool conv_mma_supported(const ConvMma& p) {
  const int64_t kp = conv_mma_depth(p);
  const int64_t limit = int64_t{1} << 30;
  return p.k > 0 && p.k % 8 == 0 && p.k <= kMaxChannels && kp <= kMaxDepth && p.n > 0 && p.oh > 0 &&
         p.ow > 0 && p.h < 8192 && p.w < 8192 && p.kh * p.dh < 8192 && p.kw * p.dw < 8192 &&
         p.n * p.c * p.h * p.w < limit && p.n * p.k * p.oh * p.ow < limit &&
         shared_bytes(p.k, kp) <= kMaxSharedBytes;
}

Status launch_conv_mma(Elem e, const ConvMma& p, const void* x, const void* weight,
                       const float* bias, const void* residual, void* y, void* stream) {
  if (e == Elem::kF32 || !conv_mma_supported(p)) {
    return unavailable_error("cuda kernel conv_mma: convolution not supported");
  }
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  MmaArgs a{};
  a.c = i32(p.c), a.h = i32(p.h), a.w = i32(p.w), a.k = i32(p.k), a.oh = i32(p.oh);
  a.ow = i32(p.ow), a.kh = i32(p.kh), a.kw = i32(p.kw), a.sh = i32(p.sh), a.sw = i32(p.sw);
  a.ph = i32(p.ph), a.pw = i32(p.pw), a.dh = i32(p.dh), a.dw = i32(p.dw);
  a.depth = i32(p.c * p.kh * p.kw);
  a.kp = i32(conv_mma_depth(p));
  a.ldw = a.kp / 2 + 4;
  a.stage_ld = stage_ld(p.k);
  a.filter_bytes = i32(filter_bytes(p.k, a.kp));
  a.pixels = i32(p.n * p.oh * p.ow);
  const int rows = rows_for(a.k / 8) * 16;
  a.tiles = (a.pixels + rows - 1) / rows;
  a.lo = p.lo;
  a.hi = p.hi;
  a.silu = p.silu;
  a.x_nhwc = p.x_nhwc;
  a.pairs = p.x_nhwc && p.c % 2 == 0;
  const int64_t smem = shared_bytes(p.k, a.kp);
  auto s = static_cast<cudaStream_t>(stream);
  if (e == Elem::kF16) return launch_typed<__half>(a, smem, x, weight, bias, residual, y, s);
  return launch_typed<__nv_bfloat16>(a, smem, x, weight, bias, residual, y, s);
}

}  // namespace kiln::compiler::cuda
