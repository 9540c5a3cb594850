// SPDX-License-Identifier: Apache-2.0
// The cuda target's 8-bit kernels: quantize, dequantize, requantize (the int8 residual add and
// zero-point shifts) and max pooling on s8 NHWC.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/int8.h"

namespace kiln::compiler::cuda {

namespace {

__device__ __forceinline__ int32_t load8(const void* p, bool u8, int64_t i) {
  return u8 ? static_cast<int32_t>(static_cast<const uint8_t*>(p)[i])
            : static_cast<int32_t>(static_cast<const int8_t*>(p)[i]);
}

__device__ __forceinline__ void store8(void* p, bool u8, int64_t i, float v, int32_t lo,
                                       int32_t hi) {
  const float c = fminf(fmaxf(v, static_cast<float>(lo)), static_cast<float>(hi));
  if (u8) {
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int32_t>(c));
  } else {
    static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int32_t>(c));
  }
}

// Image n, channel c and pixel s of element i of a dense [n, channels, pixels] tensor (stored
// [n, pixels, channels] when `nhwc`).
__device__ __forceinline__ void split_index(int64_t i, bool nhwc, int64_t channels, int64_t pixels,
                                            int64_t& n, int64_t& c, int64_t& s) {
  if (nhwc) {
    c = i % channels;
    s = (i / channels) % pixels;
    n = i / (channels * pixels);
  } else {
    s = i % pixels;
    c = (i / pixels) % channels;
    n = i / (pixels * channels);
  }
}

// The element index of logical (n, c, s) in layout `l`.
__device__ __forceinline__ int64_t at(const Int8Layout& l, int64_t n, int64_t c, int64_t s) {
  return l.nhwc ? (n * l.s + s) * l.stored_c + c : (n * l.c + c) * l.s + s;
}

// One thread per stored element of y (padding included).
template <class T>
__global__ void quantize8_kernel(const T* x, Int8Layout xl, void* y, Int8Layout yl, bool y_u8,
                                 float scale, int32_t y_off, int32_t lo, int32_t hi) {
  const int64_t total = yl.n * yl.s * yl.stored_c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t n, c, s;
    split_index(i, yl.nhwc, yl.nhwc ? yl.stored_c : yl.c, yl.s, n, c, s);
    if (c >= yl.c) {
      store8(y, y_u8, i, 0.0f, -128, 255);
      continue;
    }
    const float v = ld(x[at(xl, n, c, s)]);
    store8(y, y_u8, i, rintf(v / scale) + static_cast<float>(y_off), lo, hi);
  }
}

// quantize8_kernel where x and y have one dense layout (element i of x is element i of y), from
// f16: 8 elements a thread, a 16-byte load and an 8-byte store. (The generic kernel's per-element
// index arithmetic took 0.41 ms for ResNet-50's 51 MB space-to-depth stem input at batch 256 on
// an H200.)
__global__ void quantize8_dense_f16x8_kernel(const uint4* x, uint2* y, int64_t n8, float scale,
                                             int32_t y_off, int32_t lo, int32_t hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = x[i];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[2] = {0u, 0u};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const auto bits = static_cast<unsigned short>(words[k / 2] >> (16 * (k % 2)));
      const float f = __half2float(__ushort_as_half(bits));
      const float c =
          fminf(fmaxf(rintf(f / scale) + static_cast<float>(y_off), static_cast<float>(lo)),
                static_cast<float>(hi));
      out[k / 4] |= (static_cast<uint32_t>(static_cast<int32_t>(c)) & 0xffu) << (8 * (k % 4));
    }
    y[i] = make_uint2(out[0], out[1]);
  }
}

// One thread per logical element.
template <class T>
__global__ void dequantize8_kernel(const void* x, Int8Layout xl, bool x_u8, int32_t x_off,
                                   float scale, T* y, Int8Layout yl) {
  const int64_t total = yl.n * yl.s * yl.c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t n, c, s;
    split_index(i, yl.nhwc, yl.c, yl.s, n, c, s);
    const int32_t q = load8(x, x_u8, at(xl, n, c, s));
    y[at(yl, n, c, s)] = from_f32<T>(scale * static_cast<float>(q - x_off));
  }
}

__global__ void requant8_kernel(Requant8 r, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = static_cast<float>(load8(r.a, r.a_u8, i) - r.a_off) * r.ka;
    if (r.b != nullptr) v += static_cast<float>(load8(r.b, r.b_u8, i) - r.b_off) * r.kb;
    store8(r.y, r.y_u8, i, rintf(v) + static_cast<float>(r.y_off), r.lo, r.hi);
  }
}

// Byte `i` of a 32-bit word as u8 or s8.
__device__ __forceinline__ int32_t byte_of(uint32_t word, int i, bool u8) {
  const uint32_t v = (word >> (8 * i)) & 0xffu;
  return u8 ? static_cast<int32_t>(v) : static_cast<int32_t>(static_cast<int8_t>(v));
}

// requant8_kernel four elements at a time, 32-bit loads and stores (n % 4 == 0).
__global__ void requant8x4_kernel(Requant8 r, int64_t n4) {
  const auto* a = static_cast<const uint32_t*>(r.a);
  const auto* b = static_cast<const uint32_t*>(r.b);
  auto* y = static_cast<uint32_t*>(r.y);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t wa = a[i];
    const uint32_t wb = b != nullptr ? b[i] : 0u;
    uint32_t out = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float v = static_cast<float>(byte_of(wa, k, r.a_u8) - r.a_off) * r.ka;
      if (b != nullptr) v += static_cast<float>(byte_of(wb, k, r.b_u8) - r.b_off) * r.kb;
      const float c = fminf(fmaxf(rintf(v) + static_cast<float>(r.y_off), static_cast<float>(r.lo)),
                            static_cast<float>(r.hi));
      out |= (static_cast<uint32_t>(static_cast<int32_t>(c)) & 0xffu) << (8 * k);
    }
    y[i] = out;
  }
}

// clamp(round_half_even(x / scale) + zp, lo, hi) - zp as a float (a whole number), 0 where not
// `real` (padding).
__device__ __forceinline__ float centered_value(float x, bool real, float scale, int32_t zp,
                                                int32_t lo, int32_t hi) {
  if (!real) return 0.0f;
  return fminf(fmaxf(rintf(x / scale) + static_cast<float>(zp), static_cast<float>(lo)),
               static_cast<float>(hi)) -
         static_cast<float>(zp);
}

// centered_value as an f16 integer (exact).
__device__ __forceinline__ __half centered_half(float x, bool real, float scale, int32_t zp,
                                                int32_t lo, int32_t hi) {
  return __float2half_rn(centered_value(x, real, scale, zp, lo, hi));
}

// One thread per pixel: c strided f32 loads (coalesced across the warp), one 16-byte store.
__global__ void quantize_to_f16x8_kernel(const float* x, int64_t n, int64_t c, int64_t s,
                                         float scale, int32_t zp, int32_t lo, int32_t hi,
                                         uint4* y) {
  const int64_t total = n * s;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t image = i / s;
    const float* px = x + image * c * s + (i - image * s);
    __align__(16) __half v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = centered_half(k < c ? px[k * s] : 0.0f, k < c, scale, zp, lo, hi);
    y[i] = *reinterpret_cast<const uint4*>(v);
  }
}

__device__ __forceinline__ void store_s2d(const float (&v)[16], __half* y) {
  __align__(16) __half h[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) h[k] = __float2half_rn(v[k]);
  reinterpret_cast<uint4*>(y)[0] = reinterpret_cast<const uint4*>(h)[0];
  reinterpret_cast<uint4*>(y)[1] = reinterpret_cast<const uint4*>(h)[1];
}

__device__ __forceinline__ void store_s2d(const float (&v)[16], int8_t* y) {
  uint32_t words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    words[k / 4] |= (static_cast<uint32_t>(static_cast<int32_t>(v[k])) & 0xffu) << (8 * (k % 4));
  }
  *reinterpret_cast<uint4*>(y) = make_uint4(words[0], words[1], words[2], words[3]);
}

// One thread per 2x2 block: 2C 8-byte loads (a row's two pixels; a warp's are contiguous), 16
// channels stored (f16: two 16-byte stores; s8: one). C compile-time, so `v` stays in registers.
template <int C, class T>
__global__ void quantize_s2d_kernel(const float* __restrict__ x, int64_t n, int64_t h, int64_t w,
                                    float scale, int32_t zp, int32_t lo, int32_t hi,
                                    T* __restrict__ y) {
  const int64_t h2 = h / 2, w2 = w / 2;
  const int64_t total = n * h2 * w2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bx = i % w2;
    const int64_t by = (i / w2) % h2;
    const int64_t image = i / (w2 * h2);
    float v[16];
#pragma unroll
    for (int k = 4 * C; k < 16; ++k) v[k] = 0.0f;
#pragma unroll
    for (int ci = 0; ci < C; ++ci) {
#pragma unroll
      for (int dy = 0; dy < 2; ++dy) {
        const float2 p =
            *reinterpret_cast<const float2*>(x + ((image * C + ci) * h + 2 * by + dy) * w + 2 * bx);
        v[(dy * 2) * C + ci] = centered_value(p.x, true, scale, zp, lo, hi);
        v[(dy * 2 + 1) * C + ci] = centered_value(p.y, true, scale, zp, lo, hi);
      }
    }
    store_s2d(v, y + 16 * i);
  }
}

template <class T>
void launch_s2d(const float* x, int64_t n, int64_t c, int64_t h, int64_t w, float scale, int32_t zp,
                int32_t lo, int32_t hi, T* y, cudaStream_t s) {
  const unsigned blocks = blocks_for(n * (h / 2) * (w / 2));
  switch (c) {
    case 1:
      quantize_s2d_kernel<1><<<blocks, kThreads, 0, s>>>(x, n, h, w, scale, zp, lo, hi, y);
      break;
    case 2:
      quantize_s2d_kernel<2><<<blocks, kThreads, 0, s>>>(x, n, h, w, scale, zp, lo, hi, y);
      break;
    case 3:
      quantize_s2d_kernel<3><<<blocks, kThreads, 0, s>>>(x, n, h, w, scale, zp, lo, hi, y);
      break;
    default:
      quantize_s2d_kernel<4><<<blocks, kThreads, 0, s>>>(x, n, h, w, scale, zp, lo, hi, y);
      break;
  }
}

// A block per (image, 64 channels): 16 lanes of 4 channels (char4) by 16 rows of pixels, each
// thread summing every 16th pixel of its channels, the rows then reduced in shared memory.
// ResNet-50's and EfficientNet's first pools (a thread per channel) ran at under 100 GB/s.
constexpr int kMeanLanes = 16;
constexpr int kMeanRows = 16;
__global__ void mean8x4_kernel(const char4* x, int64_t c, int64_t stored_c, int64_t s, float scale,
                               float* y) {
  __shared__ int4 partial[kMeanRows][kMeanLanes];
  const int64_t image = blockIdx.x;
  const int64_t c4 = stored_c / 4;
  const int64_t ch4 = static_cast<int64_t>(blockIdx.y) * kMeanLanes + threadIdx.x;
  int4 sum = make_int4(0, 0, 0, 0);
  if (ch4 < c4) {
    const char4* px = x + image * s * c4 + ch4;
    for (int64_t p = threadIdx.y; p < s; p += kMeanRows) {
      const char4 v = px[p * c4];
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || ch4 >= c4) return;
  for (int r = 1; r < kMeanRows; ++r) {
    const int4 o = partial[r][threadIdx.x];
    sum.x += o.x;
    sum.y += o.y;
    sum.z += o.z;
    sum.w += o.w;
  }
  const int sums[4] = {sum.x, sum.y, sum.z, sum.w};
  for (int e = 0; e < 4; ++e) {
    const int64_t ch = ch4 * 4 + e;
    if (ch < c) y[image * c + ch] = scale * static_cast<float>(sums[e]) / static_cast<float>(s);
  }
}

// Four channels per thread, grid-stride: y = round(x * k * sigmoid(gate)), clamped.
__global__ void channel_scale8_kernel(const char4* x, const float* gate, char4* y,
                                      ChannelScale8 p) {
  const int64_t c4 = p.stored_c / 4;
  const int64_t total = p.n * p.s * c4;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i % c4) * 4;
    const int64_t image = i / (c4 * p.s);
    const char4 v = x[i];
    const int in[4] = {v.x, v.y, v.z, v.w};
    signed char out[4];
    for (int e = 0; e < 4; ++e) {
      float g = 0.0f;
      if (ch + e < p.c) g = p.k / (1.0f + __expf(-gate[image * p.c + ch + e]));
      const int q = __float2int_rn(static_cast<float>(in[e]) * g);
      out[e] = static_cast<signed char>(min(max(q, p.lo), p.hi));
    }
    y[i] = make_char4(out[0], out[1], out[2], out[3]);
  }
}

// One thread per (image, channel): consecutive threads read consecutive channels of a pixel.
__global__ void mean8_kernel(const int8_t* x, int64_t n, int64_t c, int64_t stored_c, int64_t s,
                             float scale, float* y) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t image = i / c;
    const int8_t* px = x + image * s * stored_c + (i - image * c);
    int32_t sum = 0;
    for (int64_t p = 0; p < s; ++p) sum += px[p * stored_c];
    y[i] = scale * static_cast<float>(sum) / static_cast<float>(s);
  }
}

// Sixteen channels per thread (c % 16 == 0): 16-byte loads, four bytewise signed maxima per
// word. Index arithmetic in `I` (int32_t where every index fits: 64-bit divisions made ResNet-50's
// 3x3/2 pool of 205 MB take 0.138 ms at batch 256 on an H200); a K x K window when K > 0 (its
// loops unrolled), p.kh x p.kw otherwise.
template <class I, int K>
__global__ void maxpool8x16_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, Pool8 p) {
  const I c16 = static_cast<I>(p.c / 16);
  const I ow = static_cast<I>(p.ow), oh = static_cast<I>(p.oh);
  const I h = static_cast<I>(p.h), w = static_cast<I>(p.w);
  const int kh = K > 0 ? K : p.kh;
  const int kw = K > 0 ? K : p.kw;
  const I total = static_cast<I>(p.n) * oh * ow * c16;
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
       i < total; i += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x)) {
    const I c = i % c16;
    const I pixel = i / c16;
    const I ox = pixel % ow;
    const I oy = (pixel / ow) % oh;
    const I n = pixel / (ow * oh);
    uint4 m = make_uint4(0x80808080u, 0x80808080u, 0x80808080u, 0x80808080u);
#pragma unroll
    for (int r = 0; r < kh; ++r) {
      const I iy = oy * p.sh - p.ph + r;
      if (iy < 0 || iy >= h) continue;
#pragma unroll
      for (int q = 0; q < kw; ++q) {
        const I ix = ox * p.sw - p.pw + q;
        if (ix < 0 || ix >= w) continue;
        const uint4 v = x[((n * h + iy) * w + ix) * c16 + c];
        m.x = __vmaxs4(m.x, v.x);
        m.y = __vmaxs4(m.y, v.y);
        m.z = __vmaxs4(m.z, v.z);
        m.w = __vmaxs4(m.w, v.w);
      }
    }
    y[i] = m;
  }
}

// Four channels per thread (c % 4 == 0) as one 32-bit load.
__global__ void maxpool8_kernel(const char4* x, char4* y, Pool8 p) {
  const int64_t c4 = p.c / 4;
  const int64_t total = p.n * p.oh * p.ow * c4;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % c4;
    const int64_t ox = (i / c4) % p.ow;
    const int64_t oy = (i / (c4 * p.ow)) % p.oh;
    const int64_t n = i / (c4 * p.ow * p.oh);
    int m0 = -128, m1 = -128, m2 = -128, m3 = -128;
    for (int r = 0; r < p.kh; ++r) {
      const int64_t iy = oy * p.sh - p.ph + r;
      if (iy < 0 || iy >= p.h) continue;
      for (int q = 0; q < p.kw; ++q) {
        const int64_t ix = ox * p.sw - p.pw + q;
        if (ix < 0 || ix >= p.w) continue;
        const char4 v = x[((n * p.h + iy) * p.w + ix) * c4 + c];
        m0 = max(m0, static_cast<int>(v.x));
        m1 = max(m1, static_cast<int>(v.y));
        m2 = max(m2, static_cast<int>(v.z));
        m3 = max(m3, static_cast<int>(v.w));
      }
    }
    y[i] = make_char4(static_cast<signed char>(m0), static_cast<signed char>(m1),
                      static_cast<signed char>(m2), static_cast<signed char>(m3));
  }
}

// `v` (a requantized value, in the output's units) through the SiLU of the real value when
// `silu` (the output's scale) is positive: v * sigmoid(v * silu).
__device__ __forceinline__ float silu8(float v, float silu) {
  return silu > 0.0f ? v / (1.0f + __expf(-v * silu)) : v;
}

// Four channels per thread (c % 4 == 0): the taps' char4 of x and of the filter, s32 sums, the
// per-channel requantization in f32 rounded half to even.
__global__ void depthwise8_kernel(const char4* x, const char4* w, const float4* scale,
                                  const float4* bias, char4* y, Depthwise8 p) {
  const int64_t c4 = p.c / 4;
  const int64_t total = p.n * p.oh * p.ow * c4;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % c4;
    const int64_t ox = (i / c4) % p.ow;
    const int64_t oy = (i / (c4 * p.ow)) % p.oh;
    const int64_t n = i / (c4 * p.ow * p.oh);
    int a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int r = 0; r < p.kh; ++r) {
      const int64_t iy = oy * p.sh - p.ph + r * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int q = 0; q < p.kw; ++q) {
        const int64_t ix = ox * p.sw - p.pw + q * p.dw;
        if (ix < 0 || ix >= p.width) continue;
        const char4 v = x[((n * p.h + iy) * p.width + ix) * c4 + c];
        const char4 f = w[(r * p.kw + q) * c4 + c];
        a0 += static_cast<int>(v.x) * f.x;
        a1 += static_cast<int>(v.y) * f.y;
        a2 += static_cast<int>(v.z) * f.z;
        a3 += static_cast<int>(v.w) * f.w;
      }
    }
    const float4 k = scale[c];
    const float4 b = bias[c];
    auto out = [&](int acc, float ks, float bs) {
      const int q = __float2int_rn(silu8(static_cast<float>(acc) * ks + bs, p.silu));
      return static_cast<signed char>(min(max(q, p.lo), p.hi));
    };
    y[i] = make_char4(out(a0, k.x, b.x), out(a1, k.y, b.y), out(a2, k.z, b.z), out(a3, k.w, b.w));
  }
}

// Sixteen channels per thread (c % 16 == 0, 16-byte aligned tensors): one 16-byte load of x and
// of the filter a tap; 32-bit indices (I) where every index fits.
template <class I>
__global__ void depthwise8x16_kernel(const uint4* x, const uint4* w, const float4* scale,
                                     const float4* bias, uint4* y, Depthwise8 p) {
  const I c16 = static_cast<I>(p.c / 16);
  const I ow = static_cast<I>(p.ow), oh = static_cast<I>(p.oh);
  const I h = static_cast<I>(p.h), width = static_cast<I>(p.width);
  const I total = static_cast<I>(p.n) * oh * ow * c16;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I c = i % c16;
    const I pix = i / c16;
    const I ox = pix % ow;
    const I oy = (pix / ow) % oh;
    const I n = pix / (ow * oh);
    int acc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[e] = 0;
    for (int r = 0; r < p.kh; ++r) {
      const I iy = oy * p.sh - p.ph + r * p.dh;
      if (iy < 0 || iy >= h) continue;
      for (int q = 0; q < p.kw; ++q) {
        const I ix = ox * p.sw - p.pw + q * p.dw;
        if (ix < 0 || ix >= width) continue;
        const uint4 v = x[((n * h + iy) * width + ix) * c16 + c];
        const uint4 f = w[(r * p.kw + q) * c16 + c];
        const char4* vb = reinterpret_cast<const char4*>(&v);
        const char4* fb = reinterpret_cast<const char4*>(&f);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[4 * e] += static_cast<int>(vb[e].x) * fb[e].x;
          acc[4 * e + 1] += static_cast<int>(vb[e].y) * fb[e].y;
          acc[4 * e + 2] += static_cast<int>(vb[e].z) * fb[e].z;
          acc[4 * e + 3] += static_cast<int>(vb[e].w) * fb[e].w;
        }
      }
    }
    uint4 out;
    char4* ob = reinterpret_cast<char4*>(&out);
    auto rq = [&](int a, float ks, float bs) {
      const int q = __float2int_rn(silu8(static_cast<float>(a) * ks + bs, p.silu));
      return static_cast<signed char>(min(max(q, p.lo), p.hi));
    };
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float4 k = scale[4 * c + e];
      const float4 b = bias[4 * c + e];
      ob[e] = make_char4(rq(acc[4 * e], k.x, b.x), rq(acc[4 * e + 1], k.y, b.y),
                         rq(acc[4 * e + 2], k.z, b.z), rq(acc[4 * e + 3], k.w, b.w));
    }
    y[i] = out;
  }
}

}  // namespace

Status launch_quantize8(Elem e, const void* x, const Int8Layout& xl, void* y, const Int8Layout& yl,
                        bool y_u8, float scale, int32_t y_off, int32_t lo, int32_t hi,
                        void* stream) {
  const int64_t total = yl.n * yl.s * yl.stored_c;
  if (total <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  switch (e) {
    case Elem::kF32:
      quantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const float*>(x), xl, y,
                                                              yl, y_u8, scale, y_off, lo, hi);
      break;
    case Elem::kF16: {
      const bool dense = xl.nhwc == yl.nhwc && xl.n == yl.n && xl.c == yl.c && xl.s == yl.s &&
                         xl.stored_c == xl.c && yl.stored_c == yl.c;
      if (dense && total % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(y) % 8 == 0) {
        quantize8_dense_f16x8_kernel<<<blocks_for(total / 8), kThreads, 0, s>>>(
            static_cast<const uint4*>(x), static_cast<uint2*>(y), total / 8, scale, y_off, lo, hi);
        break;
      }
      quantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const __half*>(x), xl, y,
                                                              yl, y_u8, scale, y_off, lo, hi);
      break;
    }
    case Elem::kBF16:
      quantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(
          static_cast<const __nv_bfloat16*>(x), xl, y, yl, y_u8, scale, y_off, lo, hi);
      break;
  }
  return launched("quantize8");
}

Status launch_dequantize8(const void* x, const Int8Layout& xl, bool x_u8, int32_t x_off,
                          float scale, Elem e, void* y, const Int8Layout& yl, void* stream) {
  const int64_t total = yl.n * yl.s * yl.c;
  if (total <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  switch (e) {
    case Elem::kF32:
      dequantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, xl, x_u8, x_off, scale,
                                                                static_cast<float*>(y), yl);
      break;
    case Elem::kF16:
      dequantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, xl, x_u8, x_off, scale,
                                                                static_cast<__half*>(y), yl);
      break;
    case Elem::kBF16:
      dequantize8_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, xl, x_u8, x_off, scale,
                                                                static_cast<__nv_bfloat16*>(y), yl);
      break;
  }
  return launched("dequantize8");
}

Status launch_quantize_to_f16x8(const float* x, int64_t n, int64_t c, int64_t s, float scale,
                                int32_t zp, int32_t lo, int32_t hi, void* y, void* stream) {
  if (c < 1 || c > 8) {
    return invalid_argument_error("cuda kernel quantize_to_f16x8: 1 to 8 channels expected");
  }
  const int64_t total = n * s;
  if (total <= 0) return Status();
  quantize_to_f16x8_kernel<<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, c, s, scale, zp, lo, hi, static_cast<uint4*>(y));
  return launched("quantize_to_f16x8");
}

Status launch_quantize_s2d(const float* x, int64_t n, int64_t c, int64_t h, int64_t w, float scale,
                           int32_t zp, int32_t lo, int32_t hi, bool s8, void* y, void* stream) {
  if (c < 1 || c > 4 || h % 2 != 0 || w % 2 != 0 || reinterpret_cast<uintptr_t>(x) % 8 != 0) {
    return invalid_argument_error(
        "cuda kernel quantize_s2d: 1 to 4 channels, an even height and width and an 8-byte "
        "aligned input expected");
  }
  const int64_t total = n * (h / 2) * (w / 2);
  if (total <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  if (s8) {
    launch_s2d(x, n, c, h, w, scale, zp, lo, hi, static_cast<int8_t*>(y), s);
  } else {
    launch_s2d(x, n, c, h, w, scale, zp, lo, hi, static_cast<__half*>(y), s);
  }
  return launched("quantize_s2d");
}

Status launch_mean8(const void* x, int64_t n, int64_t c, int64_t stored_c, int64_t s, float scale,
                    float* y, void* stream) {
  const int64_t total = n * c;
  if (total <= 0 || s <= 0) return Status();
  auto st = static_cast<cudaStream_t>(stream);
  if (stored_c % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0 && n < (int64_t{1} << 31)) {
    const dim3 grid(static_cast<unsigned>(n),
                    static_cast<unsigned>((stored_c / 4 + kMeanLanes - 1) / kMeanLanes));
    mean8x4_kernel<<<grid, dim3(kMeanLanes, kMeanRows), 0, st>>>(static_cast<const char4*>(x), c,
                                                                 stored_c, s, scale, y);
  } else {
    mean8_kernel<<<blocks_for(total), kThreads, 0, st>>>(static_cast<const int8_t*>(x), n, c,
                                                         stored_c, s, scale, y);
  }
  return launched("mean8");
}

Status launch_channel_scale8(const ChannelScale8& p, void* stream) {
  if (p.stored_c % 4 != 0 || reinterpret_cast<uintptr_t>(p.x) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(p.y) % 4 != 0) {
    return invalid_argument_error(
        "cuda kernel channel_scale8: channels not a multiple of 4 or operands not 4-byte aligned");
  }
  const int64_t total = p.n * p.s * (p.stored_c / 4);
  if (total <= 0) return Status();
  channel_scale8_kernel<<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const char4*>(p.x), p.gate, static_cast<char4*>(p.y), p);
  return launched("channel_scale8");
}

Status launch_requant8(const Requant8& r, int64_t n, void* stream) {
  if (n <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; };
  if (n % 4 == 0 && aligned(r.a) && aligned(r.b) && aligned(r.y)) {
    requant8x4_kernel<<<blocks_for(n / 4), kThreads, 0, s>>>(r, n / 4);
  } else {
    requant8_kernel<<<blocks_for(n), kThreads, 0, s>>>(r, n);
  }
  return launched("requant8");
}

Status launch_maxpool8(const void* x, void* y, const Pool8& p, void* stream) {
  if (p.c % 4 != 0)
    return invalid_argument_error("cuda kernel maxpool8: channels not a multiple of 4");
  const int64_t total = p.n * p.oh * p.ow * (p.c / 4);
  if (total <= 0) return Status();
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.c % 16 == 0 && aligned(x) && aligned(y)) {
    auto xs = static_cast<const uint4*>(x);
    auto ys = static_cast<uint4*>(y);
    auto st = static_cast<cudaStream_t>(stream);
    const unsigned blocks = blocks_for(total / 4);
    // Every input and output index, and the grid-stride step, fit in int32.
    const bool small =
        p.n * p.h * p.w * p.c / 16 < (int64_t{1} << 30) && total / 4 < (int64_t{1} << 30);
    if (small && p.kh == 3 && p.kw == 3) {
      maxpool8x16_kernel<int32_t, 3><<<blocks, kThreads, 0, st>>>(xs, ys, p);
    } else if (small) {
      maxpool8x16_kernel<int32_t, 0><<<blocks, kThreads, 0, st>>>(xs, ys, p);
    } else {
      maxpool8x16_kernel<int64_t, 0><<<blocks, kThreads, 0, st>>>(xs, ys, p);
    }
    return launched("maxpool8");
  }
  maxpool8_kernel<<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const char4*>(x), static_cast<char4*>(y), p);
  return launched("maxpool8");
}

Status launch_depthwise8(const Depthwise8& p, void* stream) {
  if (p.c % 4 != 0)
    return invalid_argument_error("cuda kernel depthwise8: channels not a multiple of 4");
  const int64_t total = p.n * p.oh * p.ow * (p.c / 4);
  if (total <= 0) return Status();
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (!aligned(p.scale) || !aligned(p.bias)) {
    return invalid_argument_error("cuda kernel depthwise8: scale and bias not 16-byte aligned");
  }
  auto st = static_cast<cudaStream_t>(stream);
  if (p.c % 16 == 0 && aligned(p.x) && aligned(p.w) && aligned(p.y)) {
    const int64_t reach = std::max(p.n * p.h * p.width * p.c, p.n * p.oh * p.ow * p.c) / 16;
    auto xs = static_cast<const uint4*>(p.x);
    auto ws = static_cast<const uint4*>(p.w);
    auto sc = reinterpret_cast<const float4*>(p.scale);
    auto bs = reinterpret_cast<const float4*>(p.bias);
    auto ys = static_cast<uint4*>(p.y);
    if (reach < (int64_t{1} << 30)) {
      depthwise8x16_kernel<int32_t><<<blocks_for(total / 4), kThreads, 0, st>>>(xs, ws, sc, bs, ys, p);
    } else {
      depthwise8x16_kernel<int64_t><<<blocks_for(total / 4), kThreads, 0, st>>>(xs, ws, sc, bs, ys, p);
    }
    return launched("depthwise8");
  }
  depthwise8_kernel<<<blocks_for(total), kThreads, 0, st>>>(
      static_cast<const char4*>(p.x), static_cast<const char4*>(p.w),
      reinterpret_cast<const float4*>(p.scale), reinterpret_cast<const float4*>(p.bias),
      static_cast<char4*>(p.y), p);
  return launched("depthwise8");
}

}  // namespace kiln::compiler::cuda
