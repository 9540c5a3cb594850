// SPDX-License-Identifier: Apache-2.0
// The cuda target's own kernels: elementwise unary/binary with broadcasting, per-channel affine
// (bias, BatchNorm) with ReLU, 2-D pooling, global pooling, softmax, casts and permuting copies;
// each on f32, f16 or bf16 tensors, computing in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <string>

#include "compiler/targets/cuda/kernels.h"

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
    case Unary::kIdentity: return x;
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

template <class From, class To>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  KILN_GRID_STRIDE(i, n) {
    y[i] = from_f32<To>(ld(x[i]));
  }
}

template <class T>
__global__ void binary_same_kernel(Binary op, const T* a, const T* b, T* y, int64_t n, bool relu) {
  KILN_GRID_STRIDE(i, n) {
    const float v = apply_binary(op, ld(a[i]), ld(b[i]));
    y[i] = from_f32<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

template <class T>
__global__ void binary_broadcast_kernel(Binary op, const T* a, const T* b, T* y, int64_t n,
                                        BroadcastIndex index, bool relu) {
  KILN_GRID_STRIDE(i, n) {
    int64_t rest = i;
    int64_t ai = 0;
    int64_t bi = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      const int64_t q = rest / index.out_dims[d];
      const int64_t r = rest - q * index.out_dims[d];
      ai += r * index.a_strides[d];
      bi += r * index.b_strides[d];
      rest = q;
    }
    const float v = apply_binary(op, ld(a[ai]), ld(b[bi]));
    y[i] = from_f32<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

template <class T>
__global__ void channel_affine_kernel(const T* x, T* y, const float* scale, const float* shift,
                                      const T* residual, int64_t n, int64_t channels, int64_t inner,
                                      float lo, float hi) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t c = (i / inner) % channels;
    float v = ld(x[i]);
    if (scale != nullptr) v *= scale[c];
    if (shift != nullptr) v += shift[c];
    if (residual != nullptr) v += ld(residual[i]);
    y[i] = from_f32<T>(fminf(fmaxf(v, lo), hi));
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
    float acc = p.max ? -FLT_MAX : 0.0f;
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

// One block per row: a block-wide reduction in shared memory.
template <bool kMax, class T>
__global__ void global_pool_kernel(const T* x, T* y, int64_t inner) {
  __shared__ float partial[kThreads];
  const T* row = x + blockIdx.x * inner;
  float acc = kMax ? -FLT_MAX : 0.0f;
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
    float acc = kMax ? -FLT_MAX : 0.0f;
    for (int64_t p = 0; p < hw; ++p) {
      const float v = ld(img[p * channels]);
      acc = kMax ? fmaxf(acc, v) : acc + v;
    }
    y[i] = from_f32<T>(kMax ? acc : acc / static_cast<float>(hw));
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

template <class T>
__global__ void permute_kernel(const T* x, T* y, int64_t n, int rank, BroadcastIndex index) {
  KILN_GRID_STRIDE(i, n) {
    int64_t rest = i;
    int64_t xi = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = rest / index.out_dims[d];
      xi += (rest - q * index.out_dims[d]) * index.a_strides[d];
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
    unary_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        op, static_cast<const T*>(x), static_cast<T*>(y), n, alpha, beta);
    return launched("unary");
  });
}

Status launch_cast(Elem from, Elem to, const void* x, void* y, int64_t n, void* stream) {
  if (n <= 0) return Status();
  return dispatch(from, [&](auto from_tag) {
    return dispatch(to, [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      cast_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const From*>(x), static_cast<To*>(y), n);
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
    if (contiguous) {
      binary_same_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, ta, tb, ty, n, relu);
    } else {
      binary_broadcast_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, ta, tb, ty, n, index, relu);
    }
    return launched("binary");
  });
}

Status launch_channel_affine(Elem e, const void* x, void* y, const float* scale, const float* shift,
                             const void* residual, int64_t n, int64_t channels, int64_t inner,
                             float lo, float hi, void* stream) {
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    channel_affine_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), scale, shift, static_cast<const T*>(residual),
        n, channels, inner, lo, hi);
    return launched("channel_affine");
  });
}

Status launch_pool2d(Elem e, const Pool2d& p, const void* x, void* y, void* stream) {
  const int64_t n = p.n * p.c * p.oh * p.ow;
  if (n <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    pool2d_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(x), static_cast<T*>(y), n);
    return launched("pool2d");
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
    if (nhwc && max) {
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
    layernorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), scale, bias, cols, epsilon);
    return launched("layernorm");
  });
}

Status launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, bool log,
                      void* stream) {
  if (rows <= 0) return Status();
  return dispatch(e, [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), cols, log);
    return launched("softmax");
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
  auto s = static_cast<cudaStream_t>(stream);
  if (element_bytes == 8) {
    permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const int64_t*>(x),
                                                      static_cast<int64_t*>(y), n, rank, index);
  } else if (element_bytes == 4) {
    permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const float*>(x),
                                                      static_cast<float*>(y), n, rank, index);
  } else if (element_bytes == 2) {
    permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(x),
                                                      static_cast<uint16_t*>(y), n, rank, index);
  } else if (element_bytes == 1) {
    permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x),
                                                      static_cast<uint8_t*>(y), n, rank, index);
  } else {
    return invalid_argument_error("cuda kernel permute: element size " +
                                  std::to_string(element_bytes) + " is not 1, 2, 4 or 8 bytes");
  }
  return launched("permute");
}

}  // namespace kiln::compiler::cuda
