// SPDX-License-Identifier: Apache-2.0
// The own int8 convolution (int8_gemm.h): an implicit GEMM on mma.sync.m16n8k32 (s8 x s8 ->
// s32). Each block computes BM output pixels by BN output channels; the reduction (filter taps x
// channels, 16-channel pieces of several taps in one step where c < 64: the 16-channel
// space-to-depth stem) goes through shared memory in 64-byte steps, loaded by cp.async into a
// STAGES-deep pipeline (16-byte chunks XOR-swizzled so that ldmatrix reads them without bank
// conflicts; zeros for window positions outside the image), the fragments by ldmatrix. A 1x1
// convolution is a plain GEMM (a stride-2 one gathers its rows). The residual tile is fetched
// into shared memory with the first reduction step; the epilogue runs on the accumulator
// fragments and writes s8 into that tile, which goes out 16 contiguous bytes a thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/int8_gemm.h"

namespace kiln::compiler::cuda {
namespace {

constexpr int kBk = 64;  // reduction bytes per pipeline stage

// The geometry in 32-bit ints (int8_gemm_supported keeps pixel counts within them).
struct GemmArgs {
  int m;     // output pixels n * oh * ow
  int c, k;  // input channels, output channels
  int h, w, oh, ow, stride;
  int r, s, ph, pw;  // the filter window and its leading pads
  int depth;         // the reduction: r * s * c
  int residual;
  float rescale, lo, hi;
  float silu;  // > 0: the SiLU of the real value (the output's scale)
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global `src` to shared `dst`; zeros when !valid (src still a valid address).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
// 8 bytes (8-byte aligned), through L1; zeros when !valid.
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset in a stage of 16-byte chunk `chunk` (0..3) of row `row` (64-byte rows): the chunk
// index XOR bits 1-2 of the row, so the 8 rows an ldmatrix reads hit 8 distinct bank groups.
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kBk + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// The s8 output tile (the residual's first, read in place) per row: BN + 16 bytes, so that the
// fragments' 2-byte accesses of 8 rows hit distinct banks and 16-byte chunks stay aligned.
template <int BN>
__host__ __device__ constexpr int out_ld() {
  return BN + 16;
}

// Shared memory: the pipeline's stages, the s8 output tile after them, the scales and biases.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__host__ __device__ constexpr int pipe_bytes() {
  return STAGES * (BM + BN) * kBk;
}
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__host__ __device__ constexpr int shared_bytes() {
  return pipe_bytes<BM, BN, WARPS_M, WARPS_N, STAGES>() + BM * out_ld<BN>() + 2 * BN * 4;
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    int8_gemm_kernel(GemmArgs a, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                     const float* __restrict__ scale, const float* __restrict__ bias,
                     const int8_t* __restrict__ z, int8_t* __restrict__ y) {
  constexpr int kThreadsPerBlock = WARPS_M * WARPS_N * 32;
  constexpr int kWarpM = BM / WARPS_M;  // rows per warp
  constexpr int kWarpN = BN / WARPS_N;  // columns per warp
  constexpr int kMf = kWarpM / 16;
  constexpr int kNf = kWarpN / 8;
  static_assert(kNf % 2 == 0, "B fragments are loaded in pairs");
  constexpr int kRowsPerPass = kThreadsPerBlock / 4;  // each thread loads one chunk of 4 per row
  constexpr int kARows = BM / kRowsPerPass;
  constexpr int kBRows = BN / kRowsPerPass;
  static_assert(BM % kRowsPerPass == 0 && BN % kRowsPerPass == 0, "tile rows per pass");

  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* a_tiles = smem;
  uint8_t* b_tiles = smem + STAGES * BM * kBk;
  uint8_t* out_tile = smem + pipe_bytes<BM, BN, WARPS_M, WARPS_N, STAGES>();
  constexpr int kOutLd = out_ld<BN>();
  float* s_scale = reinterpret_cast<float*>(out_tile + BM * kOutLd);
  float* s_bias = s_scale + BN;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp / WARPS_N;
  const int warp_n = warp % WARPS_N;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;

  for (int i = tid; i < BN; i += kThreadsPerBlock) {
    const bool in = n0 + i < a.k;
    s_scale[i] = in ? scale[n0 + i] : 0.0f;
    s_bias[i] = in ? bias[n0 + i] : 0.0f;
  }

  // The rows this thread loads (fixed over the reduction: the output pixel's image and window
  // corner; iy0 = -2^20 for a row past the end) and its chunk within them.
  const int chunk = tid & 3;
  int a_img[kARows], a_iy[kARows], a_ix[kARows];
  for (int i = 0; i < kARows; ++i) {
    const int m = m0 + tid / 4 + i * kRowsPerPass;
    const int per_image = a.oh * a.ow;
    const int img = m / per_image;
    const int rem = m - img * per_image;
    const int oy = rem / a.ow;
    a_img[i] = img;
    a_iy[i] = m < a.m ? oy * a.stride - a.ph : -(1 << 20);
    a_ix[i] = (rem - oy * a.ow) * a.stride - a.pw;
  }
  const int8_t* b_src[kBRows];
  bool b_ok[kBRows];
  const int w_row = a.depth;  // KRSC
  for (int i = 0; i < kBRows; ++i) {
    const int n = n0 + tid / 4 + i * kRowsPerPass;
    b_ok[i] = n < a.k;
    b_src[i] = b_ok[i] ? w + static_cast<int64_t>(n) * w_row : w;
  }
  const int tiles = (a.depth + kBk - 1) / kBk;
  // Reduction step `tile`: entries tile * 64 .. + 63 of the window (r, s, c order, as the KRSC
  // filter's rows), this thread's 16 of them at `r0`: tap (ty, tx), channels c0 .. c0 + 15 (c a
  // multiple of 16: one tap). Zeros past the end and for window positions outside the image.
  // With c a multiple of 8 only (MobileNetV2's and EfficientNet's 24 and 40 channels) the 16
  // bytes are two 8-byte halves, each within one tap (load8).
  auto load8 = [&](int tile, int slot) {
    const uint32_t as = smem_addr(a_tiles + slot * BM * kBk);
    const uint32_t bs = smem_addr(b_tiles + slot * BN * kBk);
    for (int h = 0; h < 2; ++h) {
      const int r = tile * kBk + chunk * 16 + h * 8;
      const int tap = r / a.c;
      const int c0 = r - tap * a.c;
      const int ty = tap / a.s;
      const int tx = tap - ty * a.s;
      const bool k_ok = r < a.depth;
      for (int i = 0; i < kARows; ++i) {
        const int iy = a_iy[i] + ty;
        const int ix = a_ix[i] + tx;
        const bool ok = k_ok && iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
        const int8_t* src = x + ((a_img[i] * a.h + iy) * a.w + ix) * a.c + c0;
        cp_async8(as + swizzle(tid / 4 + i * kRowsPerPass, chunk) + h * 8, ok ? src : x, ok);
      }
      for (int i = 0; i < kBRows; ++i) {
        const bool ok = b_ok[i] && k_ok;
        cp_async8(bs + swizzle(tid / 4 + i * kRowsPerPass, chunk) + h * 8, ok ? b_src[i] + r : w,
                  ok);
      }
    }
  };
  auto load = [&](int tile, int slot) {
    if (a.c % 16 != 0) {
      load8(tile, slot);
      return;
    }
    const int r0 = tile * kBk + chunk * 16;
    const int tap = r0 / a.c;
    const int c0 = r0 - tap * a.c;
    const int ty = tap / a.s;
    const int tx = tap - ty * a.s;
    const bool k_ok = r0 < a.depth;
    const uint32_t as = smem_addr(a_tiles + slot * BM * kBk);
    const uint32_t bs = smem_addr(b_tiles + slot * BN * kBk);
    for (int i = 0; i < kARows; ++i) {
      const int iy = a_iy[i] + ty;
      const int ix = a_ix[i] + tx;
      const bool ok = k_ok && iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
      const int8_t* src = x + ((a_img[i] * a.h + iy) * a.w + ix) * a.c + c0;
      cp_async16(as + swizzle(tid / 4 + i * kRowsPerPass, chunk), ok ? src : x, ok);
    }
    for (int i = 0; i < kBRows; ++i) {
      const bool ok = b_ok[i] && k_ok;
      cp_async16(bs + swizzle(tid / 4 + i * kRowsPerPass, chunk), ok ? b_src[i] + r0 : w, ok);
    }
  };

  int acc[kMf][kNf][4];
  for (int i = 0; i < kMf; ++i) {
    for (int j = 0; j < kNf; ++j) {
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0;
    }
  }

  // The residual tile, fetched with the first reduction step (in the first group).
  constexpr int kChunks = BM * BN / 16;
  if (a.residual) {
    for (int e = tid; e < kChunks; e += kThreadsPerBlock) {
      const int row = e / (BN / 16);
      const int col = (e - row * (BN / 16)) * 16;
      const bool ok = m0 + row < a.m && n0 + col < a.k;
      const int8_t* src = ok ? z + static_cast<int64_t>(m0 + row) * a.k + n0 + col : z;
      cp_async16(smem_addr(out_tile + row * kOutLd + col), src, ok);
    }
  }
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) load(s, s);
    cp_async_commit();
  }
  // ldmatrix lane roles: A x4 = rows 0-7 / 8-15 of the 16-row fragment, chunk 0 / 1 of the k32
  // step; B x4 = two 8-column fragments, chunk 0 / 1.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int a_chunk = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8;
  const int b_chunk = (lane >> 3) & 1;
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = t + STAGES - 1;
    if (next < tiles) load(next, next % STAGES);
    cp_async_commit();
    const int slot = t % STAGES;
    const uint8_t* as = a_tiles + slot * BM * kBk;
    const uint8_t* bs = b_tiles + slot * BN * kBk;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t af[kMf][4];
      uint32_t bf[kNf][2];
#pragma unroll
      for (int i = 0; i < kMf; ++i) {
        const int row = warp_m * kWarpM + i * 16 + a_row;
        ldmatrix_x4(af[i], smem_addr(as + swizzle(row, ks * 2 + a_chunk)));
      }
#pragma unroll
      for (int j = 0; j < kNf; j += 2) {
        const int row = warp_n * kWarpN + j * 8 + b_row;
        uint32_t r[4];
        ldmatrix_x4(r, smem_addr(bs + swizzle(row, ks * 2 + b_chunk)));
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMf; ++i) {
#pragma unroll
        for (int j = 0; j < kNf; ++j) mma_s8(acc[i][j], af[i], bf[j][0], bf[j][1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // The epilogue on the fragments (c0, c1: row g, columns 2 tig and 2 tig + 1; c2, c3: row
  // g + 8): two channels of one pixel at a time, the residual read from and the s8 result
  // written to the same two bytes of the output tile.
  const int g = lane >> 2;
  const int tig = lane & 3;
#pragma unroll
  for (int j = 0; j < kNf; ++j) {
    const int col = warp_n * kWarpN + j * 8 + tig * 2;
    const float2 sc = *reinterpret_cast<const float2*>(s_scale + col);
    const float2 bi = *reinterpret_cast<const float2*>(s_bias + col);
#pragma unroll
    for (int i = 0; i < kMf; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * kWarpM + i * 16 + g + half * 8;
        auto* at = reinterpret_cast<uint16_t*>(out_tile + row * kOutLd + col);
        float v0 = __fadd_rn(__fmul_rn(static_cast<float>(acc[i][j][2 * half]), sc.x), bi.x);
        float v1 = __fadd_rn(__fmul_rn(static_cast<float>(acc[i][j][2 * half + 1]), sc.y), bi.y);
        if (a.residual) {
          const uint16_t zz = *at;
          v0 = __fmul_rn(__fadd_rn(v0, static_cast<float>(static_cast<int8_t>(zz & 0xff))),
                         a.rescale);
          v1 =
              __fmul_rn(__fadd_rn(v1, static_cast<float>(static_cast<int8_t>(zz >> 8))), a.rescale);
        } else if (a.silu > 0.0f) {
          v0 = v0 / (1.0f + __expf(-v0 * a.silu));
          v1 = v1 / (1.0f + __expf(-v1 * a.silu));
        }
        const int q0 = __float2int_rn(fminf(fmaxf(v0, a.lo), a.hi));
        const int q1 = __float2int_rn(fminf(fmaxf(v1, a.lo), a.hi));
        *at = static_cast<uint16_t>((q0 & 0xff) | ((q1 & 0xff) << 8));
      }
    }
  }
  __syncthreads();
  // The tile out, 16 bytes a thread.
  for (int e = tid; e < kChunks; e += kThreadsPerBlock) {
    const int row = e / (BN / 16);
    const int col = (e - row * (BN / 16)) * 16;
    if (m0 + row < a.m && n0 + col < a.k) {
      *reinterpret_cast<uint4*>(y + static_cast<int64_t>(m0 + row) * a.k + n0 + col) =
          *reinterpret_cast<const uint4*>(out_tile + row * kOutLd + col);
    }
  }
}

struct Config {
  const char* name;
  Status (*launch)(const GemmArgs&, const void*, const void*, const float*, const float*,
                   const void*, void*, cudaStream_t);
};

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
Status launch_config(const GemmArgs& a, const void* x, const void* w, const float* scale,
                     const float* bias, const void* z, void* y, cudaStream_t s) {
  constexpr int smem = shared_bytes<BM, BN, WARPS_M, WARPS_N, STAGES>();
  auto kernel = int8_gemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) {
    return unavailable_error(std::string("cuda kernel int8_gemm: ") + cudaGetErrorString(attr));
  }
  const dim3 grid(static_cast<unsigned>((a.k + BN - 1) / BN),
                  static_cast<unsigned>((a.m + BM - 1) / BM));
  kernel<<<grid, WARPS_M * WARPS_N * 32, smem, s>>>(
      a, static_cast<const int8_t*>(x), static_cast<const int8_t*>(w), scale, bias,
      static_cast<const int8_t*>(z), static_cast<int8_t*>(y));
  return launched("int8_gemm");
}

constexpr Config kConfigs[] = {
    {"128x128x64/4", launch_config<128, 128, 2, 4, 4>},
    {"128x64x64/4", launch_config<128, 64, 2, 2, 4>},
    {"64x64x64/4", launch_config<64, 64, 2, 2, 4>},
    {"256x128x64/3", launch_config<256, 128, 4, 2, 3>},
    {"64x128x64/4", launch_config<64, 128, 2, 2, 4>},
    {"128x128x64/2", launch_config<128, 128, 2, 4, 2>},
    {"128x256x64/3", launch_config<128, 256, 2, 4, 3>},
    // Short reductions (the stem's 256, a 1x1's 64): more blocks a multiprocessor instead of
    // deeper pipelines (added last: tuning choices store the index).
    {"128x64x64/2", launch_config<128, 64, 2, 2, 2>},
    {"256x64x64/3", launch_config<256, 64, 4, 2, 3>},
    {"64x64x64/2", launch_config<64, 64, 2, 2, 2>},
};
constexpr int kConfigCount = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));
constexpr int kMaxGridRows = 65535;

}  // namespace

int int8_gemm_configs() {
  return kConfigCount;
}

const char* int8_gemm_config_name(int config) {
  return config >= 0 && config < kConfigCount ? kConfigs[config].name : "none";
}

bool int8_gemm_supported(const Int8Gemm& p) {
  const int64_t limit = int64_t{1} << 31;
  const int64_t m = p.n * p.oh * p.ow;
  return p.n > 0 && p.c > 0 && p.k > 0 && p.oh > 0 && p.ow > 0 && p.c % 8 == 0 && p.k % 16 == 0 &&
         (p.stride == 1 || p.stride == 2) && p.r >= 1 && p.s >= 1 && p.r <= 16 && p.s <= 16 &&
         p.ph >= 0 && p.pw >= 0 && p.ph < p.r && p.pw < p.s && p.h < 16384 && p.w < 16384 &&
         m * p.k < limit && p.n * p.h * p.w * p.c < limit && p.k * p.r * p.s * p.c < limit &&
         (m + 63) / 64 <= kMaxGridRows && p.lo >= -128 && p.hi <= 127 && p.lo <= p.hi &&
         !(p.residual && p.silu > 0.0f);
}

Status launch_int8_gemm(int config, const Int8Gemm& p, const void* x, const void* w,
                        const float* scale, const float* bias, const void* z, void* y,
                        void* stream) {
  if (config < 0 || config >= kConfigCount) {
    return invalid_argument_error("cuda kernel int8_gemm: no tile configuration " +
                                  std::to_string(config));
  }
  if (!int8_gemm_supported(p)) {
    return unavailable_error(
        "cuda kernel int8_gemm: convolution not supported (input channels must be multiples of 8, "
        "output channels multiples of 16)");
  }
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (!aligned(x) || !aligned(w) || !aligned(y) || (p.residual && !aligned(z))) {
    return invalid_argument_error("cuda kernel int8_gemm: operands must be 16-byte aligned");
  }
  GemmArgs a{};
  a.m = static_cast<int>(p.n * p.oh * p.ow);
  a.c = static_cast<int>(p.c);
  a.k = static_cast<int>(p.k);
  a.h = static_cast<int>(p.h);
  a.w = static_cast<int>(p.w);
  a.oh = static_cast<int>(p.oh);
  a.ow = static_cast<int>(p.ow);
  a.stride = p.stride;
  a.r = static_cast<int>(p.r);
  a.s = static_cast<int>(p.s);
  a.ph = static_cast<int>(p.ph);
  a.pw = static_cast<int>(p.pw);
  a.depth = static_cast<int>(p.r * p.s * p.c);
  a.residual = p.residual ? 1 : 0;
  a.rescale = p.rescale;
  a.lo = static_cast<float>(p.lo);
  a.hi = static_cast<float>(p.hi);
  a.silu = p.silu;
  // For 256x128 tiles the grid's rows are half of 64x64's: supported() bounds the latter.
  return kConfigs[config].launch(a, x, w, scale, bias, z, y, static_cast<cudaStream_t>(stream));
}

}  // namespace kiln::compiler::cuda
