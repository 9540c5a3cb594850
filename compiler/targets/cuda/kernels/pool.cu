// SPDX-License-Identifier: Apache-2.0
// The pooling kernels: 2-D max and average pooling over a window and global pooling, NCHW or
// NHWC; each on f32, f16 or bf16 tensors, computing in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/pool.h"

namespace kiln::compiler::cuda {

namespace {

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

}  // namespace

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

}  // namespace kiln::compiler::cuda
