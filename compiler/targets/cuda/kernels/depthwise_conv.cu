// SPDX-License-Identifier: Apache-2.0
// The depthwise convolution kernels (one filter per channel) with bias and activation in the
// same pass: one element a thread, or NHWC 16 bytes of channels and several output pixels a
// thread; each on f32, f16 or bf16 tensors, computing in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/depthwise_conv.h"
#include "core/env.h"

namespace kiln::compiler::cuda {

namespace {

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

}  // namespace

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

}  // namespace kiln::compiler::cuda
