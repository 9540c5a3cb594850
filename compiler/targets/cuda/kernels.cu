// SPDX-License-Identifier: Apache-2.0
// The cuda target's own kernels: elementwise unary/binary with broadcasting, per-channel affine
// (bias, BatchNorm) with ReLU, depthwise convolution, 2-D pooling, global pooling, softmax, casts
// and permuting copies; each on f32, f16 or bf16 tensors, computing in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "compiler/targets/cuda/kernel_common.cuh"
#include "compiler/targets/cuda/kernels.h"
#include "core/env.h"

namespace kiln::compiler::cuda {

namespace {

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
bool fits_32(int64_t reach) {
  return reach < (int64_t{1} << 30);
}

// The largest magnitude of an offset through `rank` dims of `dims` at `strides` (negative strides
// of reversed slices too), at least `n`.
int64_t reach_of(int64_t n, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t sum = 0;
  for (int d = 0; d < rank; ++d) sum += (dims[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
  return std::max(n, sum);
}

__device__ float apply_unary(Unary op, float x, float alpha, float beta) {
  switch (op) {
    case Unary::kRelu: return x > 0.0f ? x : 0.0f;
    case Unary::kSigmoid: return 1.0f / (1.0f + expf(-x));
    case Unary::kTanh: return tanhf(x);
    case Unary::kExp: return expf(x);
    case Unary::kLog: return logf(x);
    case Unary::kNeg: return -x;
    case Unary::kAbs: return fabsf(x);
    case Unary::kSqrt: return sqrtf(x);
    case Unary::kErf: return erff(x);
    case Unary::kReciprocal: return 1.0f / x;
    case Unary::kFloor: return floorf(x);
    case Unary::kCeil: return ceilf(x);
    case Unary::kSin: return sinf(x);
    case Unary::kCos: return cosf(x);
    case Unary::kSoftplus: return x > 20.0f ? x : log1pf(expf(x));
    case Unary::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case Unary::kElu: return x >= 0.0f ? x : alpha * (expf(x) - 1.0f);
    case Unary::kClip: return fminf(fmaxf(x, alpha), beta);
    case Unary::kHardSigmoid: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case Unary::kHardSwish: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case Unary::kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Unary::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Unary::kSwish: return x / (1.0f + expf(-alpha * x));
    case Unary::kIdentity: return x;
    case Unary::kScale: return alpha * x;
  }
  return x;
}

__device__ float apply_binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::kAdd: return a + b;
    case Binary::kSub: return a - b;
    case Binary::kMul: return a * b;
    case Binary::kDiv: return a / b;
    case Binary::kPow: return powf(a, b);
    case Binary::kMax: return fmaxf(a, b);
    case Binary::kMin: return fminf(a, b);
  }
  return a;
}

template <class T>
__global__ void unary_kernel(Unary op, const T* x, T* y, int64_t n, float alpha, float beta) {
  KILN_GRID_STRIDE(i, n) {
    y[i] = from_f32<T>(apply_unary(op, ld(x[i]), alpha, beta));
  }
}

// Whether 16-byte units of `bytes` bytes at every pointer given are aligned and whole.
bool vectorizable(int64_t bytes, std::initializer_list<const void*> pointers) {
  if (bytes % 16 != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// The elementwise kernels on 16-byte units (8 halves, 4 floats) a thread: one load and one store
// instruction per unit instead of per element.
template <class T>
__global__ void unary_vec_kernel(Unary op, const uint4* x, uint4* y, int64_t units, float alpha,
                                 float beta) {
  constexpr int kPer = sizeof(uint4) / sizeof(T);
  KILN_GRID_STRIDE(i, units) {
    uint4 u = x[i];
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int k = 0; k < kPer; ++k) e[k] = from_f32<T>(apply_unary(op, ld(e[k]), alpha, beta));
    y[i] = u;
  }
}

template <class T>
__global__ void binary_same_vec_kernel(Binary op, const uint4* a, const uint4* b, uint4* y,
                                       int64_t units, bool relu) {
  constexpr int kPer = sizeof(uint4) / sizeof(T);
  KILN_GRID_STRIDE(i, units) {
    uint4 ua = a[i];
    const uint4 ub = b[i];
    T* ea = reinterpret_cast<T*>(&ua);
    const T* eb = reinterpret_cast<const T*>(&ub);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const float v = apply_binary(op, ld(ea[k]), ld(eb[k]));
      ea[k] = from_f32<T>(relu && v < 0.0f ? 0.0f : v);
    }
    y[i] = ua;
  }
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  KILN_GRID_STRIDE(i, n) {
    y[i] = from_f32<To>(ld(x[i]));
  }
}

// 8 elements a thread (f32 to f16: two 16-byte loads, one 16-byte store): the input Cast of an
// fp16 model at batch 256 took 0.105 ms one element a thread on an H200, 2.2 TB/s.
template <class T>
struct alignas(sizeof(T) * 8) Pack8 {
  T v[8];
};
template <class From, class To>
__global__ void cast_vec_kernel(const Pack8<From>* x, Pack8<To>* y, int64_t n8) {
  KILN_GRID_STRIDE(i, n8) {
    const Pack8<From> a = x[i];
    Pack8<To> b;
#pragma unroll
    for (int k = 0; k < 8; ++k) b.v[k] = from_f32<To>(ld(a.v[k]));
    y[i] = b;
  }
}

template <class T>
__global__ void binary_same_kernel(Binary op, const T* a, const T* b, T* y, int64_t n, bool relu) {
  KILN_GRID_STRIDE(i, n) {
    const float v = apply_binary(op, ld(a[i]), ld(b[i]));
    y[i] = from_f32<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

template <class I, class T>
__global__ void binary_broadcast_kernel(Binary op, const T* a, const T* b, T* y, int64_t n,
                                        BroadcastIndex index, bool relu) {
  KILN_GRID_STRIDE_T(I, i, n) {
    I rest = i;
    I ai = 0;
    I bi = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(index.out_dims[d]);
      const I q = rest / dim;
      const I r = rest - q * dim;
      ai += r * static_cast<I>(index.a_strides[d]);
      bi += r * static_cast<I>(index.b_strides[d]);
      rest = q;
    }
    const float v = apply_binary(op, ld(a[ai]), ld(b[bi]));
    y[i] = from_f32<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

template <class I, class T>
__global__ void channel_affine_kernel(const T* x, T* y, const float* scale, const float* shift,
                                      const T* residual, int64_t n, int64_t channels, int64_t inner,
                                      float lo, float hi, bool silu) {
  const I ch = static_cast<I>(channels);
  const I in = static_cast<I>(inner);
  KILN_GRID_STRIDE_T(I, i, n) {
    const I c = (in == 1 ? i : i / in) % ch;
    float v = ld(x[i]);
    if (scale != nullptr) v *= scale[c];
    if (shift != nullptr) v += shift[c];
    if (residual != nullptr) v += ld(residual[i]);
    y[i] = from_f32<T>(clamp_act(v, lo, hi, silu));
  }
}

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
bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// channel_affine_kernel over 16-byte vectors: one channel per lane (NHWC: channels a multiple of
// the lanes), or one channel for the whole vector (NCHW: inner a multiple of the lanes).
template <class T>
__global__ void channel_affine_vec_kernel(const Vec<T>* x, Vec<T>* y, const float* scale,
                                          const float* shift, const Vec<T>* residual,
                                          int32_t vectors, int32_t channels, int32_t inner,
                                          float lo, float hi, bool silu) {
  constexpr int kLanes = Vec<T>::kLanes;
  KILN_GRID_STRIDE_T(int32_t, i, vectors) {
    const int32_t first = i * kLanes;
    const int32_t c0 = inner == 1 ? first % channels : (first / inner) % channels;
    const Vec<T> xv = x[i];
    Vec<T> rv;
    if (residual != nullptr) rv = residual[i];
    Vec<T> out;
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const int32_t c = inner == 1 ? c0 + k : c0;
      float v = ld(xv.v[k]);
      if (scale != nullptr) v *= scale[c];
      if (shift != nullptr) v += shift[c];
      if (residual != nullptr) v += ld(rv.v[k]);
      out.v[k] = from_f32<T>(clamp_act(v, lo, hi, silu));
    }
    y[i] = out;
  }
}

// launch_channel_scale, one element a thread: i = (n*C + c)*hw + p, or (n*hw + p)*C + c (NHWC).
template <class T>
__global__ void channel_scale_kernel(const T* x, const T* s, T* y, int64_t n, int64_t channels,
                                     int64_t hw, bool nhwc, bool sigmoid) {
  KILN_GRID_STRIDE_T(int64_t, i, n) {
    const int64_t img = i / (channels * hw);
    const int64_t c = nhwc ? i % channels : (i / hw) % channels;
    float f = ld(s[img * channels + c]);
    if (sigmoid) f = 1.0f / (1.0f + __expf(-f));
    y[i] = from_f32<T>(ld(x[i]) * f);
  }
}

// launch_channel_scale over NHWC 16-byte vectors: i = (n*hw + p)*C/lanes + channel vector, the
// scales of a vector's channels one 16-byte load.
template <class T>
__global__ void channel_scale_nhwc_vec_kernel(const Vec<T>* x, const Vec<T>* s, Vec<T>* y,
                                              int32_t vectors, int32_t cv, int32_t hw,
                                              bool sigmoid) {
  constexpr int kLanes = Vec<T>::kLanes;
  KILN_GRID_STRIDE_T(int32_t, i, vectors) {
    const int32_t v = i % cv;
    const int32_t img = i / cv / hw;
    const Vec<T> xv = x[i];
    const Vec<T> sv = s[img * cv + v];
    Vec<T> out;
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      float f = ld(sv.v[k]);
      if (sigmoid) f = 1.0f / (1.0f + __expf(-f));
      out.v[k] = from_f32<T>(ld(xv.v[k]) * f);
    }
    y[i] = out;
  }
}

// Max/average pooling of NHWC tensors 16 bytes of channels a thread (channels a multiple of the
// lanes): i = ((n*OH + oy)*OW + ox)*C/lanes + channel vector.
template <class T>
__global__ void pool2d_nhwc_vec_kernel(Pool2d p, const Vec<T>* x, Vec<T>* y, int32_t vectors) {
  constexpr int kLanes = Vec<T>::kLanes;
  const int32_t cv = static_cast<int32_t>(p.c) / kLanes;
  const int32_t ow = static_cast<int32_t>(p.ow);
  const int32_t oh = static_cast<int32_t>(p.oh);
  const int32_t h = static_cast<int32_t>(p.h);
  const int32_t w = static_cast<int32_t>(p.w);
  KILN_GRID_STRIDE_T(int32_t, i, vectors) {
    const int32_t c = i % cv;
    int32_t rest = i / cv;
    const int32_t ox = rest % ow;
    rest /= ow;
    const int32_t oy = rest % oh;
    const int32_t nimg = rest / oh;
    const Vec<T>* plane = x + nimg * h * w * cv + c;
    float acc[kLanes];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) acc[k] = p.max ? -INFINITY : 0.0f;
    int32_t count = 0;
    for (int32_t ky = 0; ky < p.kh; ++ky) {
      const int32_t iy = oy * static_cast<int32_t>(p.sh) - static_cast<int32_t>(p.ph) +
                         ky * static_cast<int32_t>(p.dh);
      for (int32_t kx = 0; kx < p.kw; ++kx) {
        const int32_t ix = ox * static_cast<int32_t>(p.sw) - static_cast<int32_t>(p.pw) +
                           kx * static_cast<int32_t>(p.dw);
        if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
          const Vec<T> v = plane[(iy * w + ix) * cv];
#pragma unroll
          for (int k = 0; k < kLanes; ++k) {
            const float f = ld(v.v[k]);
            acc[k] = p.max ? fmaxf(acc[k], f) : acc[k] + f;
          }
          ++count;
        } else if (p.count_include_pad) {
          ++count;
        }
      }
    }
    Vec<T> out;
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      out.v[k] =
          from_f32<T>(p.max ? acc[k] : (count > 0 ? acc[k] / static_cast<float>(count) : 0.0f));
    }
    y[i] = out;
  }
}

// NHWC copy of x (NCHW, or NHWC when `x_nhwc`) with its c channels widened to cp, the new ones
// zero: i = (n*hw + pixel)*cp + channel.
template <class T>
__global__ void pad_channels_kernel(const T* x, T* y, int32_t total, int32_t c, int32_t hw,
                                    int32_t cp, bool x_nhwc) {
  KILN_GRID_STRIDE_T(int32_t, i, total) {
    const int32_t ch = i % cp;
    const int32_t rest = i / cp;
    const int32_t pixel = rest % hw;
    const int32_t img = rest / hw;
    T v = from_f32<T>(0.0f);
    if (ch < c) v = x_nhwc ? x[rest * c + ch] : x[(img * c + ch) * hw + pixel];
    y[i] = v;
  }
}

// pad_channels_kernel one pixel a thread, its padded channels written as 16-byte vectors
// (padded a multiple of the lanes): an NCHW input is read coalesced across the threads. (One
// element a thread, reading NCHW at stride hw, took 0.44 ms at batch 256 for a 224x224 image on an
// H200.)
template <class T>
__global__ void pad_channels_vec_kernel(const T* x, Vec<T>* y, int32_t pixels, int32_t c,
                                        int32_t hw, int32_t pv, bool x_nhwc) {
  constexpr int kLanes = Vec<T>::kLanes;
  KILN_GRID_STRIDE_T(int32_t, i, pixels) {
    const int32_t pixel = i % hw;
    const int32_t img = i / hw;
    for (int32_t q = 0; q < pv; ++q) {
      Vec<T> out;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        const int32_t ch = q * kLanes + k;
        out.v[k] = ch >= c  ? from_f32<T>(0.0f)
                   : x_nhwc ? x[i * c + ch]
                            : x[(img * c + ch) * hw + pixel];
      }
      y[i * pv + q] = out;
    }
  }
}

template <class T>
__global__ void pool2d_kernel(Pool2d p, const T* x, T* y, int64_t n) {
  KILN_GRID_STRIDE(i, n) {
    // NCHW: i = ((n*C + c)*OH + oy)*OW + ox, the window read along rows of one plane; NHWC:
    // i = ((n*OH + oy)*OW + ox)*C + c, the window read at a stride of C.
    int64_t ox, oy, c, nimg;
    if (p.nhwc) {
      c = i % p.c;
      ox = (i / p.c) % p.ow;
      oy = (i / (p.c * p.ow)) % p.oh;
      nimg = i / (p.c * p.ow * p.oh);
    } else {
      ox = i % p.ow;
      oy = (i / p.ow) % p.oh;
      c = (i / (p.ow * p.oh)) % p.c;
      nimg = i / (p.ow * p.oh * p.c);
    }
    const T* plane = p.nhwc ? x + nimg * p.h * p.w * p.c + c : x + (nimg * p.c + c) * p.h * p.w;
    const int64_t step = p.nhwc ? p.c : 1;
    float acc = p.max ? -INFINITY : 0.0f;
    int64_t count = 0;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
        const bool inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
        if (inside) {
          const float v = ld(plane[(iy * p.w + ix) * step]);
          acc = p.max ? fmaxf(acc, v) : acc + v;
          ++count;
        } else if (p.count_include_pad) {
          ++count;  // padding counts in the divisor (ceil_mode windows are not lowered here)
        }
      }
    }
    y[i] = from_f32<T>(p.max ? acc : (count > 0 ? acc / static_cast<float>(count) : 0.0f));
  }
}

// Depthwise convolution, one output element a thread: NCHW i = ((n*C + c)*OH + oy)*OW + ox, NHWC
// i = ((n*OH + oy)*OW + ox)*C + c; weight [kh*kw, C]; indices of type I (32-bit when they fit).
template <class T, class I>
__global__ void depthwise_kernel(DepthwiseConv p, const T* x, const float* weight,
                                 const float* bias, T* y, I n) {
  const I ch = static_cast<I>(p.c);
  const I h = static_cast<I>(p.h);
  const I w = static_cast<I>(p.w);
  const I oh = static_cast<I>(p.oh);
  const I ow = static_cast<I>(p.ow);
  const I kh = static_cast<I>(p.kh);
  const I kw = static_cast<I>(p.kw);
  KILN_GRID_STRIDE_T(I, i, n) {
    I ox, oy, c, nimg;
    if (p.nhwc) {
      c = i % ch;
      I rest = i / ch;
      ox = rest % ow;
      rest /= ow;
      oy = rest % oh;
      nimg = rest / oh;
    } else {
      ox = i % ow;
      I rest = i / ow;
      oy = rest % oh;
      rest /= oh;
      c = rest % ch;
      nimg = rest / ch;
    }
    const T* plane = p.nhwc ? x + nimg * h * w * ch + c : x + (nimg * ch + c) * h * w;
    const I step = p.nhwc ? ch : 1;
    float acc = bias != nullptr ? bias[c] : 0.0f;
    for (I ky = 0; ky < kh; ++ky) {
      const I iy = oy * static_cast<I>(p.sh) - static_cast<I>(p.ph) + ky * static_cast<I>(p.dh);
      if (iy < 0 || iy >= h) continue;
      for (I kx = 0; kx < kw; ++kx) {
        const I ix = ox * static_cast<I>(p.sw) - static_cast<I>(p.pw) + kx * static_cast<I>(p.dw);
        if (ix < 0 || ix >= w) continue;
        acc = fmaf(fminf(ld(plane[(iy * w + ix) * step]), p.in_hi), weight[(ky * kw + kx) * ch + c],
                   acc);
      }
    }
    y[i] = from_f32<T>(clamp_act(acc, p.lo, p.hi, p.silu));
  }
}

// Depthwise convolution of NHWC tensors, 16 bytes of channels (kLanes) a thread and kPix
// neighbouring output pixels of one row, so that each input column loaded feeds every output of
// the row that reads it: i = ((n*OH + oy)*ceil(OW/kPix) + ox / kPix)*C/kLanes + channel vector.
// The filter width KW and the horizontal stride SW are compile-time (the taps unroll fully);
// no dilation. Channels a multiple of kLanes; weight and bias 16-byte aligned.
template <class T, int KW, int SW, int kPix>
__global__ void depthwise_nhwc_vec_kernel(DepthwiseConv p, const Vec<T>* x, const float* weight,
                                          const float* bias, Vec<T>* y, int32_t threads) {
  constexpr int kLanes = Vec<T>::kLanes;
  constexpr int kCols = (kPix - 1) * SW + KW;  // input columns a row of kPix outputs reads
  const int32_t c = static_cast<int32_t>(p.c);
  const int32_t cv = c / kLanes;
  const int32_t h = static_cast<int32_t>(p.h);
  const int32_t w = static_cast<int32_t>(p.w);
  const int32_t oh = static_cast<int32_t>(p.oh);
  const int32_t ow = static_cast<int32_t>(p.ow);
  const int32_t kh = static_cast<int32_t>(p.kh);
  const int32_t sh = static_cast<int32_t>(p.sh);
  const int32_t ph = static_cast<int32_t>(p.ph);
  const int32_t pw = static_cast<int32_t>(p.pw);
  const int32_t row_blocks = (ow + kPix - 1) / kPix;
  KILN_GRID_STRIDE_T(int32_t, i, threads) {
    const int32_t v = i % cv;
    int32_t rest = i / cv;
    const int32_t ox0 = (rest % row_blocks) * kPix;
    rest /= row_blocks;
    const int32_t oy = rest % oh;
    const int32_t nimg = rest / oh;
    const int32_t c0 = v * kLanes;
    float acc[kPix][kLanes];
#pragma unroll
    for (int l = 0; l < kLanes; l += 4) {
      const float4 b = bias != nullptr ? *reinterpret_cast<const float4*>(bias + c0 + l)
                                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int q = 0; q < kPix; ++q) {
        acc[q][l] = b.x;
        acc[q][l + 1] = b.y;
        acc[q][l + 2] = b.z;
        acc[q][l + 3] = b.w;
      }
    }
    const int32_t ix0 = ox0 * SW - pw;
    for (int32_t ky = 0; ky < kh; ++ky) {
      const int32_t iy = oy * sh - ph + ky;
      if (iy < 0 || iy >= h) continue;
      float wt[KW][kLanes];
#pragma unroll
      for (int kx = 0; kx < KW; ++kx) {
        const float* tap = weight + (ky * KW + kx) * c + c0;
#pragma unroll
        for (int l = 0; l < kLanes; l += 4) {
          const float4 f = *reinterpret_cast<const float4*>(tap + l);
          wt[kx][l] = f.x;
          wt[kx][l + 1] = f.y;
          wt[kx][l + 2] = f.z;
          wt[kx][l + 3] = f.w;
        }
      }
      const Vec<T>* row = x + (nimg * h + iy) * w * cv + v;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int32_t ix = ix0 + j;
        if (ix < 0 || ix >= w) continue;
        const Vec<T> xv = row[ix * cv];
        float xf[kLanes];
#pragma unroll
        for (int l = 0; l < kLanes; ++l) xf[l] = fminf(ld(xv.v[l]), p.in_hi);
#pragma unroll
        for (int q = 0; q < kPix; ++q) {
          const int kx = j - q * SW;  // the tap of output ox0 + q that reads column j
          if (kx < 0 || kx >= KW) continue;
#pragma unroll
          for (int l = 0; l < kLanes; ++l) acc[q][l] = fmaf(xf[l], wt[kx][l], acc[q][l]);
        }
      }
    }
    Vec<T>* out = y + ((nimg * oh + oy) * ow + ox0) * cv + v;
#pragma unroll
    for (int q = 0; q < kPix; ++q) {
      if (ox0 + q >= ow) break;
      Vec<T> o;
#pragma unroll
      for (int l = 0; l < kLanes; ++l)
        o.v[l] = from_f32<T>(clamp_act(acc[q][l], p.lo, p.hi, p.silu));
      out[q * cv] = o;
    }
  }
}

// One block per row: a block-wide reduction in shared memory.
template <bool kMax, class T>
__global__ void global_pool_kernel(const T* x, T* y, int64_t inner) {
  __shared__ float partial[kThreads];
  const T* row = x + blockIdx.x * inner;
  float acc = kMax ? -INFINITY : 0.0f;
  for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
    acc = kMax ? fmaxf(acc, ld(row[j])) : acc + ld(row[j]);
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      partial[threadIdx.x] = kMax ? fmaxf(partial[threadIdx.x], partial[threadIdx.x + s])
                                  : partial[threadIdx.x] + partial[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    y[blockIdx.x] = from_f32<T>(kMax ? partial[0] : partial[0] / static_cast<float>(inner));
  }
}

// One thread per (image, channel): adjacent threads read adjacent channels (coalesced).
template <bool kMax, class T>
__global__ void global_pool_nhwc_kernel(const T* x, T* y, int64_t batch, int64_t hw,
                                        int64_t channels) {
  KILN_GRID_STRIDE(i, batch * channels) {
    const int64_t c = i % channels;
    const T* img = x + (i / channels) * hw * channels + c;
    float acc = kMax ? -INFINITY : 0.0f;
    for (int64_t p = 0; p < hw; ++p) {
      const float v = ld(img[p * channels]);
      acc = kMax ? fmaxf(acc, v) : acc + v;
    }
    y[i] = from_f32<T>(kMax ? acc : acc / static_cast<float>(hw));
  }
}

// NHWC global pooling with the pixels split among a block's threads: block (image, channel
// chunk); thread t takes channel vector t % vb of the chunk (16 bytes of channels) and the pixels
// p = t / vb, t / vb + groups, ...; the groups' partial results meet in shared memory. (One
// thread per channel walking every pixel took 2.3 ms at batch 256 over EfficientNet-B0's
// 112x112x32 map on an H200: 8192 threads in all.)
template <bool kMax, class T>
__global__ void global_pool_nhwc_vec_kernel(const Vec<T>* x, T* y, int32_t hw, int32_t cv,
                                            int32_t vb) {
  constexpr int kLanes = Vec<T>::kLanes;
  __shared__ float part[kThreads * kLanes];
  const int32_t groups = static_cast<int32_t>(blockDim.x) / vb;
  const int32_t t = static_cast<int32_t>(threadIdx.x);
  const int32_t v = static_cast<int32_t>(blockIdx.y) * vb + t % vb;
  const int32_t g = t / vb;
  const int32_t img = static_cast<int32_t>(blockIdx.x);
  float acc[kLanes];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) acc[k] = kMax ? -INFINITY : 0.0f;
  if (v < cv && g < groups) {
    const Vec<T>* base = x + static_cast<int64_t>(img) * hw * cv + v;
    for (int32_t p = g; p < hw; p += groups) {
      const Vec<T> xv = base[static_cast<int64_t>(p) * cv];
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        acc[k] = kMax ? fmaxf(acc[k], ld(xv.v[k])) : acc[k] + ld(xv.v[k]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kLanes; ++k) part[t * kLanes + k] = acc[k];
  __syncthreads();
  // Thread t < vb * kLanes sums lane t % kLanes of vector t / kLanes over the groups.
  const int32_t lv = t / kLanes;
  const int32_t lane = t % kLanes;
  const int32_t ov = static_cast<int32_t>(blockIdx.y) * vb + lv;
  if (lv < vb && ov < cv) {
    float r = kMax ? -INFINITY : 0.0f;
    for (int32_t q = 0; q < groups; ++q) {
      const float w = part[(q * vb + lv) * kLanes + lane];
      r = kMax ? fmaxf(r, w) : r + w;
    }
    y[(static_cast<int64_t>(img) * cv + ov) * kLanes + lane] =
        from_f32<T>(kMax ? r : r / static_cast<float>(hw));
  }
}

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

template <class I, class T>
__global__ void permute_kernel(const T* x, T* y, int64_t n, int rank, BroadcastIndex index) {
  KILN_GRID_STRIDE_T(I, i, n) {
    I rest = i;
    I xi = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(index.out_dims[d]);
      const I q = rest / dim;
      xi += (rest - q * dim) * static_cast<I>(index.a_strides[d]);
      rest = q;
    }
    y[i] = x[xi];
  }
}

}  // namespace

Status launch_unary(Elem e, Unary op, const void* x, void* y, int64_t n, float alpha, float beta,
                    void* stream) {
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    if (vectorizable(bytes, {x, y})) {
      unary_vec_kernel<T>
          <<<blocks_for(bytes / 16), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
              op, static_cast<const uint4*>(x), static_cast<uint4*>(y), bytes / 16, alpha, beta);
    } else {
      unary_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          op, static_cast<const T*>(x), static_cast<T*>(y), n, alpha, beta);
    }
    return launched("unary");
  });
}

Status launch_cast(Elem from, Elem to, const void* x, void* y, int64_t n, void* stream) {
  if (n <= 0) return Status();
  return dispatch(from, [&](auto from_tag) {
    return dispatch(to, [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      auto s = static_cast<cudaStream_t>(stream);
      const auto aligned = [](const void* p, size_t bytes) {
        return reinterpret_cast<uintptr_t>(p) % bytes == 0;
      };
      if (n % 8 == 0 && aligned(x, sizeof(Pack8<From>)) && aligned(y, sizeof(Pack8<To>))) {
        cast_vec_kernel<<<blocks_for(n / 8), kThreads, 0, s>>>(static_cast<const Pack8<From>*>(x),
                                                               static_cast<Pack8<To>*>(y), n / 8);
      } else {
        cast_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const From*>(x),
                                                       static_cast<To*>(y), n);
      }
      return launched("cast");
    });
  });
}

Status launch_binary(Elem e, Binary op, const void* a, const void* b, void* y, int64_t n,
                     const BroadcastIndex& index, bool contiguous, bool relu, void* stream) {
  if (n <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    const auto* ta = static_cast<const T*>(a);
    const auto* tb = static_cast<const T*>(b);
    auto* ty = static_cast<T*>(y);
    // The operands' largest offsets bound their index range too.
    const int64_t reach = std::max(reach_of(n, index.rank, index.out_dims, index.a_strides),
                                   reach_of(n, index.rank, index.out_dims, index.b_strides));
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    if (contiguous && vectorizable(bytes, {a, b, y})) {
      binary_same_vec_kernel<T><<<blocks_for(bytes / 16), kThreads, 0, s>>>(
          op, static_cast<const uint4*>(a), static_cast<const uint4*>(b), static_cast<uint4*>(y),
          bytes / 16, relu);
    } else if (contiguous) {
      binary_same_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, ta, tb, ty, n, relu);
    } else if (fits_32(reach)) {
      binary_broadcast_kernel<int32_t>
          <<<blocks_for(n), kThreads, 0, s>>>(op, ta, tb, ty, n, index, relu);
    } else {
      binary_broadcast_kernel<int64_t>
          <<<blocks_for(n), kThreads, 0, s>>>(op, ta, tb, ty, n, index, relu);
    }
    return launched("binary");
  });
}

Status launch_channel_affine(Elem e, const void* x, void* y, const float* scale, const float* shift,
                             const void* residual, int64_t n, int64_t channels, int64_t inner,
                             float lo, float hi, void* stream, bool silu) {
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    const auto* tx = static_cast<const T*>(x);
    const auto* tr = static_cast<const T*>(residual);
    auto* ty = static_cast<T*>(y);
    constexpr int kLanes = Vec<T>::kLanes;
    const bool vector = fits_32(n) && n % kLanes == 0 &&
                        (inner == 1 ? channels % kLanes == 0 : inner % kLanes == 0) &&
                        aligned16(tx) && aligned16(ty) && (tr == nullptr || aligned16(tr));
    if (vector) {
      const int64_t vectors = n / kLanes;
      channel_affine_vec_kernel<T><<<blocks_for(vectors), kThreads, 0, s>>>(
          reinterpret_cast<const Vec<T>*>(tx), reinterpret_cast<Vec<T>*>(ty), scale, shift,
          reinterpret_cast<const Vec<T>*>(tr), static_cast<int32_t>(vectors),
          static_cast<int32_t>(channels), static_cast<int32_t>(inner), lo, hi, silu);
    } else if (fits_32(n)) {
      channel_affine_kernel<int32_t><<<blocks_for(n), kThreads, 0, s>>>(
          tx, ty, scale, shift, tr, n, channels, inner, lo, hi, silu);
    } else {
      channel_affine_kernel<int64_t><<<blocks_for(n), kThreads, 0, s>>>(
          tx, ty, scale, shift, tr, n, channels, inner, lo, hi, silu);
    }
    return launched("channel_affine");
  });
}

Status launch_channel_scale(Elem e, const void* x, const void* s, void* y, int64_t batch,
                            int64_t channels, int64_t hw, bool nhwc, bool sigmoid, void* stream) {
  const int64_t n = batch * channels * hw;
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto st = static_cast<cudaStream_t>(stream);
    const auto* tx = static_cast<const T*>(x);
    const auto* ts = static_cast<const T*>(s);
    auto* ty = static_cast<T*>(y);
    constexpr int kLanes = Vec<T>::kLanes;
    if (nhwc && channels % kLanes == 0 && fits_32(n) && aligned16(tx) && aligned16(ts) &&
        aligned16(ty)) {
      const int64_t vectors = n / kLanes;
      channel_scale_nhwc_vec_kernel<T><<<blocks_for(vectors), kThreads, 0, st>>>(
          reinterpret_cast<const Vec<T>*>(tx), reinterpret_cast<const Vec<T>*>(ts),
          reinterpret_cast<Vec<T>*>(ty), static_cast<int32_t>(vectors),
          static_cast<int32_t>(channels / kLanes), static_cast<int32_t>(hw), sigmoid);
    } else {
      channel_scale_kernel<T>
          <<<blocks_for(n), kThreads, 0, st>>>(tx, ts, ty, n, channels, hw, nhwc, sigmoid);
    }
    return launched("channel_scale");
  });
}

Status launch_pool2d(Elem e, const Pool2d& p, const void* x, void* y, void* stream) {
  const int64_t n = p.n * p.c * p.oh * p.ow;
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    constexpr int kLanes = Vec<T>::kLanes;
    if (p.nhwc && p.c % kLanes == 0 && fits_32(std::max(n, p.n * p.c * p.h * p.w)) &&
        aligned16(x) && aligned16(y)) {
      const int64_t vectors = n / kLanes;
      pool2d_nhwc_vec_kernel<T><<<blocks_for(vectors), kThreads, 0, s>>>(
          p, static_cast<const Vec<T>*>(x), static_cast<Vec<T>*>(y), static_cast<int32_t>(vectors));
    } else {
      pool2d_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, static_cast<const T*>(x),
                                                       static_cast<T*>(y), n);
    }
    return launched("pool2d");
  });
}

// The output pixels of a row each thread of the vectorized depthwise kernel computes. MobileNetV2
// fp16 at batch 256 on an H200 (kiln perf --device-io): 2 pixels 4.83 ms, 4 pixels 5.04 ms, 8
// pixels 5.34 ms. KILN_CUDA_DW_PIXELS (1, 2, 4 or 8) picks another, to compare them on a GPU.
constexpr int kDepthwisePixels = 2;

int depthwise_pixels() {
  static const int pixels = [] {
    const char* v = env_flag_c_str(EnvFlag::kCudaDwPixels);
    const std::string s = v != nullptr ? v : "";
    return s == "1" ? 1 : s == "4" ? 4 : s == "8" ? 8 : kDepthwisePixels;
  }();
  return pixels;
}

template <class T, int kPix>
void launch_depthwise_vec(const DepthwiseConv& p, const Vec<T>* x, const float* weight,
                          const float* bias, Vec<T>* y, cudaStream_t s) {
  constexpr int kLanes = Vec<T>::kLanes;
  const int64_t threads = p.n * p.oh * ((p.ow + kPix - 1) / kPix) * (p.c / kLanes);
  const auto count = static_cast<int32_t>(threads);
  const unsigned grid = blocks_for(threads);
  if (p.kw == 3 && p.sw == 1) {
    depthwise_nhwc_vec_kernel<T, 3, 1, kPix>
        <<<grid, kThreads, 0, s>>>(p, x, weight, bias, y, count);
  } else if (p.kw == 3) {
    depthwise_nhwc_vec_kernel<T, 3, 2, kPix>
        <<<grid, kThreads, 0, s>>>(p, x, weight, bias, y, count);
  } else if (p.sw == 1) {
    depthwise_nhwc_vec_kernel<T, 5, 1, kPix>
        <<<grid, kThreads, 0, s>>>(p, x, weight, bias, y, count);
  } else {
    depthwise_nhwc_vec_kernel<T, 5, 2, kPix>
        <<<grid, kThreads, 0, s>>>(p, x, weight, bias, y, count);
  }
}

Status launch_depthwise_conv(Elem e, const DepthwiseConv& p, const void* x, const float* weight,
                             const float* bias, void* y, void* stream) {
  const int64_t n = p.n * p.c * p.oh * p.ow;
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) -> Status {
    using T = decltype(tag);
    auto s = static_cast<cudaStream_t>(stream);
    constexpr int kLanes = Vec<T>::kLanes;
    const bool small = fits_32(std::max(n, p.n * p.c * p.h * p.w));
    const bool vector = small && p.nhwc && p.c % kLanes == 0 && (p.kw == 3 || p.kw == 5) &&
                        (p.sw == 1 || p.sw == 2) && p.dh == 1 && p.dw == 1 && aligned16(x) &&
                        aligned16(y) && aligned16(weight) && (bias == nullptr || aligned16(bias));
    if (!vector) {
      const auto* tx = static_cast<const T*>(x);
      auto* ty = static_cast<T*>(y);
      if (small) {
        depthwise_kernel<T, int32_t>
            <<<blocks_for(n), kThreads, 0, s>>>(p, tx, weight, bias, ty, static_cast<int32_t>(n));
      } else {
        depthwise_kernel<T, int64_t><<<blocks_for(n), kThreads, 0, s>>>(p, tx, weight, bias, ty, n);
      }
      return launched("depthwise_conv");
    }
    const auto* tx = static_cast<const Vec<T>*>(x);
    auto* ty = static_cast<Vec<T>*>(y);
    switch (depthwise_pixels()) {
      case 1: launch_depthwise_vec<T, 1>(p, tx, weight, bias, ty, s); break;
      case 4: launch_depthwise_vec<T, 4>(p, tx, weight, bias, ty, s); break;
      case 8: launch_depthwise_vec<T, 8>(p, tx, weight, bias, ty, s); break;
      default: launch_depthwise_vec<T, kDepthwisePixels>(p, tx, weight, bias, ty, s); break;
    }
    return launched("depthwise_conv_nhwc_vec");
  });
}

Status launch_global_pool(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                          int64_t hw, bool nhwc, bool max, void* stream) {
  const int64_t rows = batch * channels;
  if (rows <= 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    const auto* tx = static_cast<const T*>(x);
    auto* ty = static_cast<T*>(y);
    const auto grid = static_cast<unsigned>(rows);
    constexpr int kLanes = Vec<T>::kLanes;
    if (nhwc && channels % kLanes == 0 && aligned16(tx) && fits_32(batch * channels * hw)) {
      const auto cv = static_cast<int32_t>(channels / kLanes);
      const int32_t vb = std::min<int32_t>(cv, 32);  // channel vectors a block; 8+ pixel groups
      const dim3 blocks(static_cast<unsigned>(batch), static_cast<unsigned>((cv + vb - 1) / vb));
      if (max) {
        global_pool_nhwc_vec_kernel<true><<<blocks, kThreads, 0, s>>>(
            reinterpret_cast<const Vec<T>*>(tx), ty, static_cast<int32_t>(hw), cv, vb);
      } else {
        global_pool_nhwc_vec_kernel<false><<<blocks, kThreads, 0, s>>>(
            reinterpret_cast<const Vec<T>*>(tx), ty, static_cast<int32_t>(hw), cv, vb);
      }
    } else if (nhwc && max) {
      global_pool_nhwc_kernel<true>
          <<<blocks_for(rows), kThreads, 0, s>>>(tx, ty, batch, hw, channels);
    } else if (nhwc) {
      global_pool_nhwc_kernel<false>
          <<<blocks_for(rows), kThreads, 0, s>>>(tx, ty, batch, hw, channels);
    } else if (max) {
      global_pool_kernel<true><<<grid, kThreads, 0, s>>>(tx, ty, hw);
    } else {
      global_pool_kernel<false><<<grid, kThreads, 0, s>>>(tx, ty, hw);
    }
    return launched("global_pool");
  });
}

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

Status launch_pad_channels(Elem e, const void* x, void* y, int64_t batch, int64_t channels,
                           int64_t hw, int64_t padded, bool x_nhwc, void* stream) {
  const int64_t total = batch * hw * padded;
  if (total <= 0) return Status();
  if (!fits_32(total)) {
    return invalid_argument_error("cuda kernel pad_channels: the tensor has 2^30 elements or more");
  }
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kLanes = Vec<T>::kLanes;
    if (padded % kLanes == 0 && aligned16(y)) {
      const int64_t pixels = batch * hw;
      pad_channels_vec_kernel<<<blocks_for(pixels), kThreads, 0,
                                static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(x), static_cast<Vec<T>*>(y), static_cast<int32_t>(pixels),
          static_cast<int32_t>(channels), static_cast<int32_t>(hw),
          static_cast<int32_t>(padded / kLanes), x_nhwc);
      return launched("pad_channels");
    }
    pad_channels_kernel<<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), static_cast<int32_t>(total),
        static_cast<int32_t>(channels), static_cast<int32_t>(hw), static_cast<int32_t>(padded),
        x_nhwc);
    return launched("pad_channels");
  });
}

Status launch_permute(const void* x, void* y, int64_t n, int rank, const int64_t* out_dims,
                      const int64_t* in_strides, int element_bytes, void* stream) {
  if (n <= 0) return Status();
  BroadcastIndex index;
  index.rank = rank;
  for (int d = 0; d < rank; ++d) {
    index.out_dims[d] = out_dims[d];
    index.a_strides[d] = in_strides[d];
  }
  // When the innermost dim is read contiguously (a transformer's head transposes and slices keep
  // it), copy units of up to 16 bytes: the same indexing once per unit instead of per element.
  if (rank > 0 && in_strides[rank - 1] == 1) {
    for (const int unit : {16, 8, 4}) {
      if (unit <= element_bytes) break;
      const int64_t per = unit / element_bytes;
      bool fits = out_dims[rank - 1] % per == 0 &&
                  reinterpret_cast<uintptr_t>(x) % static_cast<uintptr_t>(unit) == 0 &&
                  reinterpret_cast<uintptr_t>(y) % static_cast<uintptr_t>(unit) == 0;
      for (int d = 0; d + 1 < rank && fits; ++d) fits = in_strides[d] % per == 0;
      if (!fits) continue;
      for (int d = 0; d + 1 < rank; ++d) index.a_strides[d] = in_strides[d] / per;
      index.out_dims[rank - 1] = out_dims[rank - 1] / per;
      n /= per;
      element_bytes = unit;
      break;
    }
  }
  auto s = static_cast<cudaStream_t>(stream);
  const bool narrow = fits_32(reach_of(n, rank, index.out_dims, index.a_strides));
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const auto* tx = static_cast<const T*>(x);
    auto* ty = static_cast<T*>(y);
    if (narrow) {
      permute_kernel<int32_t><<<blocks_for(n), kThreads, 0, s>>>(tx, ty, n, rank, index);
    } else {
      permute_kernel<int64_t><<<blocks_for(n), kThreads, 0, s>>>(tx, ty, n, rank, index);
    }
  };
  if (element_bytes == 16) {
    go(uint4{});
  } else if (element_bytes == 8) {
    go(int64_t{});
  } else if (element_bytes == 4) {
    go(float{});
  } else if (element_bytes == 2) {
    go(uint16_t{});
  } else if (element_bytes == 1) {
    go(uint8_t{});
  } else {
    return invalid_argument_error("cuda kernel permute: element size " +
                                  std::to_string(element_bytes) + " is not 1, 2, 4 or 8 bytes");
  }
  return launched("permute");
}

}  // namespace kiln::compiler::cuda
