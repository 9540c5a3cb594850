// SPDX-License-Identifier: Apache-2.0
// The layout kernels: a copy with channels widened (NHWC, zeros added) and the strided copy
// behind transposes, slices and NCHW/NHWC reorders, for any element size.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "compiler/targets/cuda/kernels/common.cuh"
#include "compiler/targets/cuda/kernels/layout.h"

namespace kiln::compiler::cuda {

namespace {

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
