// SPDX-License-Identifier: Apache-2.0
// The elementwise kernels: unary functions, casts, binary ops with broadcasting, the per-channel
// affine (bias, BatchNorm) with its activation and squeeze-and-excitation's channel scaling; each
// on f32, f16 or bf16 tensors, computing in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/elementwise.h"

namespace kiln::compiler::cuda {

namespace {

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

}  // namespace kiln::compiler::cuda
