// SPDX-License-Identifier: Apache-2.0
// Batched image kernels: one thread per output pixel, one grid layer per image of the batch.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "pipeline/kernels/cuda/image_batch.h"

namespace kiln::pipeline::kernels::cuda {
namespace {

constexpr int kTile = 16;

// The taps of one output index along one axis, computed as resize.cc's make_taps does (double
// weights normalised by their sum, then rounded to float), so both sides sum the same terms.
struct Taps {
  int first = 0;
  int count = 0;
  double center = 0.0;
  double support = 0.0;
  double filter_scale = 1.0;
  double total = 1.0;
  bool cubic = false;
  bool nearest = false;
};

__device__ double triangle(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

__device__ double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

__device__ double raw_weight(const Taps& t, int j) {
  const double x = (j - t.center + 0.5) / t.filter_scale;
  return t.cubic ? keys_cubic(x) : triangle(x);
}

__device__ Taps make_taps(int i, int in_size, int out_size, Interp interp) {
  Taps t;
  const double scale = static_cast<double>(in_size) / out_size;
  if (interp == Interp::kNearest) {
    t.nearest = true;
    t.first = min(static_cast<int>(floor((i + 0.5) * scale)), in_size - 1);
    t.count = 1;
    return t;
  }
  t.cubic = interp == Interp::kCubic || interp == Interp::kCubicAntialiased;
  const bool antialias = interp == Interp::kAntialiased || interp == Interp::kCubicAntialiased;
  t.filter_scale = antialias ? fmax(scale, 1.0) : 1.0;
  t.support = (t.cubic ? 2.0 : 1.0) * t.filter_scale;
  const int max_count = static_cast<int>(ceil(t.support)) * 2 + 1;
  t.center = (i + 0.5) * scale;
  const int lo = max(static_cast<int>(t.center - t.support + 0.5), 0);
  const int hi = min(static_cast<int>(t.center + t.support + 0.5), in_size);
  double total = 0.0;
  int n = 0;
  for (int j = lo; j < hi && n < max_count; ++j, ++n) total += raw_weight(t, j);
  if (total == 0.0) {  // as on the CPU: keep the nearest pixel
    t.nearest = true;
    t.first = min(static_cast<int>(t.center), in_size - 1);
    t.count = 1;
    return t;
  }
  t.first = lo;
  t.count = n;
  t.total = total;
  return t;
}

__device__ float tap_weight(const Taps& t, int k) {
  if (t.nearest) return 1.0f;
  return static_cast<float>(raw_weight(t, t.first + k) / t.total);
}

__global__ void resize_u8_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                                 Interp interp) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const int c = job.channels;
  const Taps tx = make_taps(x, job.win_width, job.dst_width, interp);
  const Taps ty = make_taps(y, job.win_height, job.dst_height, interp);
  const size_t stride = static_cast<size_t>(job.src_width) * c;
  const uint8_t* base = src + job.src_offset +
                        (static_cast<size_t>(job.win_y) + ty.first) * stride +
                        (static_cast<size_t>(job.win_x) + tx.first) * c;
  // Vertical sums first, per source column, then the horizontal sum of those: the CPU's order.
  float acc[kMaxGpuChannels] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int kx = 0; kx < tx.count; ++kx) {
    float column[kMaxGpuChannels] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint8_t* p = base + static_cast<size_t>(kx) * c;
    for (int ky = 0; ky < ty.count; ++ky) {
      const float wy = tap_weight(ty, ky);
      for (int ch = 0; ch < c; ++ch) {
        column[ch] = __fmaf_rn(wy, static_cast<float>(p[ch]), column[ch]);
      }
      p += stride;
    }
    const float wx = tap_weight(tx, kx);
    for (int ch = 0; ch < c; ++ch) acc[ch] = __fmaf_rn(wx, column[ch], acc[ch]);
  }
  uint8_t* out = dst + job.dst_offset + (static_cast<size_t>(y) * job.dst_width + x) * c;
  for (int ch = 0; ch < c; ++ch) {
    out[ch] = static_cast<uint8_t>(fminf(fmaxf(acc[ch] + 0.5f, 0.0f), 255.0f));
  }
}

__device__ const uint8_t* source_pixel(const uint8_t* src, const ImageJob& job, int x, int y,
                                       int element_size) {
  const int sy = job.win_y + (job.flip_vertical ? job.win_height - 1 - y : y);
  const int sx = job.win_x + (job.mirror ? job.win_width - 1 - x : x);
  return src + job.src_offset +
         (static_cast<size_t>(sy) * job.src_width + sx) * job.channels * element_size;
}

template <class T>
__global__ void crop_flip_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const T* in = reinterpret_cast<const T*>(source_pixel(src, job, x, y, sizeof(T)));
  T* out = reinterpret_cast<T*>(dst + job.dst_offset) +
           (static_cast<size_t>(y) * job.dst_width + x) * job.channels;
  for (int ch = 0; ch < job.channels; ++ch) out[ch] = in[ch];
}

__device__ void store(float* p, float v) {
  *p = v;
}
__device__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}
__device__ void store(uint8_t* p, float v) {
  *p = static_cast<uint8_t>(fminf(fmaxf(roundf(v), 0.0f), 255.0f));
}

template <class Out>
__global__ void crop_mirror_normalize_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                                             NormalizeConstants k, bool chw) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const uint8_t* p = source_pixel(src, job, x, y, 1);
  Out* out = reinterpret_cast<Out*>(dst + job.dst_offset);
  const size_t plane = static_cast<size_t>(job.dst_height) * job.dst_width;
  const size_t pixel = static_cast<size_t>(y) * job.dst_width + x;
  for (int ch = 0; ch < job.channels; ++ch) {
    const float v = (static_cast<float>(p[ch]) - k.mean[ch]) * k.scale[ch];
    store(chw ? out + ch * plane + pixel : out + pixel * job.channels + ch, v);
  }
}

__global__ void lut_u8_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                              const uint8_t* luts) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const uint8_t* lut = luts + static_cast<size_t>(blockIdx.z) * 256;
  const size_t at = (static_cast<size_t>(y) * job.dst_width + x) * job.channels;
  const uint8_t* in = src + job.src_offset + at;
  uint8_t* out = dst + job.dst_offset + at;
  for (int ch = 0; ch < job.channels; ++ch) out[ch] = lut[in[ch]];
}

__device__ uint8_t round_u8(float v) {
  return static_cast<uint8_t>(fminf(fmaxf(roundf(v), 0.0f), 255.0f));
}

__global__ void color_matrix_u8_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                                       const float* matrices) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const float* m = matrices + static_cast<size_t>(blockIdx.z) * 12;
  const size_t at = (static_cast<size_t>(y) * job.dst_width + x) * 3;
  const uint8_t* in = src + job.src_offset + at;
  uint8_t* out = dst + job.dst_offset + at;
  const float r = in[0], g = in[1], b = in[2];
  // No fused multiply-adds: the CPU kernel rounds each product and sum.
  for (int row = 0; row < 3; ++row) {
    const float* w = m + 3 * row;
    const float v =
        __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(w[0], r), __fmul_rn(w[1], g)), __fmul_rn(w[2], b)),
                  m[9 + row]);
    out[row] = round_u8(v);
  }
}

__global__ void warp_u8_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                               const double* warps) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const double* m = warps + static_cast<size_t>(blockIdx.z) * 8;
  const bool linear = m[6] != 0.0;
  const float fill = static_cast<float>(m[7]);
  const int h = job.src_height, w = job.src_width, c = job.channels;
  const uint8_t* in = src + job.src_offset;
  uint8_t* out = dst + job.dst_offset + (static_cast<size_t>(y) * job.dst_width + x) * c;
  auto pixel = [&](int64_t py, int64_t px, int ch) -> float {
    if (py < 0 || py >= h || px < 0 || px >= w) return fill;
    return in[(py * w + px) * c + ch];
  };
  // Unfused double and float arithmetic, as the CPU kernel computes it.
  const double ox = x + 0.5, oy = y + 0.5;
  const double sx = __dadd_rn(__dadd_rn(__dmul_rn(m[0], ox), __dmul_rn(m[1], oy)), m[2]);
  const double sy = __dadd_rn(__dadd_rn(__dmul_rn(m[3], ox), __dmul_rn(m[4], oy)), m[5]);
  if (!linear) {
    const auto ix = static_cast<int64_t>(floor(sx));
    const auto iy = static_cast<int64_t>(floor(sy));
    for (int ch = 0; ch < c; ++ch) out[ch] = static_cast<uint8_t>(pixel(iy, ix, ch));
    return;
  }
  const double fx = sx - 0.5, fy = sy - 0.5;
  const auto x0 = static_cast<int64_t>(floor(fx));
  const auto y0 = static_cast<int64_t>(floor(fy));
  const auto ax = static_cast<float>(fx - static_cast<double>(x0));
  const auto ay = static_cast<float>(fy - static_cast<double>(y0));
  const float bx = __fsub_rn(1.0f, ax), by = __fsub_rn(1.0f, ay);
  for (int ch = 0; ch < c; ++ch) {
    const float top =
        __fadd_rn(__fmul_rn(pixel(y0, x0, ch), bx), __fmul_rn(pixel(y0, x0 + 1, ch), ax));
    const float bottom =
        __fadd_rn(__fmul_rn(pixel(y0 + 1, x0, ch), bx), __fmul_rn(pixel(y0 + 1, x0 + 1, ch), ax));
    out[ch] = round_u8(__fadd_rn(__fmul_rn(top, by), __fmul_rn(bottom, ay)));
  }
}

// Reflect-101 index into [0, n), as filter.cc's.
__device__ int reflect101(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

// One pass of the separable blur, down the columns (kVertical: uint8 image -> float scratch) or
// across the rows (float scratch -> uint8 image): out = sum_k taps[k] * in[reflect(pos + k - r)],
// summed in tap order without fused multiply-adds, as the CPU does. The scratch of image i lies
// at its output's byte offset counted in floats.
template <class In, class Out, bool kVertical>
__global__ void blur_pass_kernel(const In* src, Out* dst, const ImageJob* jobs, const int2* index,
                                 const float* taps) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const int2 t = index[blockIdx.z];
  const float* w = taps + t.x;
  const int r = t.y / 2, c = job.channels;
  const int pos = kVertical ? y : x;
  const int extent = kVertical ? job.dst_height : job.dst_width;
  const size_t step = kVertical ? static_cast<size_t>(job.dst_width) * c : static_cast<size_t>(c);
  const In* line = src + (kVertical ? job.src_offset + static_cast<size_t>(x) * c
                                    : job.dst_offset + static_cast<size_t>(y) * job.dst_width * c);
  Out* out = dst + job.dst_offset + (static_cast<size_t>(y) * job.dst_width + x) * c;
  for (int ch = 0; ch < c; ++ch) {
    float acc = 0.0f;
    for (int k = 0; k < t.y; ++k) {
      const float v = static_cast<float>(line[reflect101(pos + k - r, extent) * step + ch]);
      acc = __fadd_rn(acc, __fmul_rn(w[k], v));
    }
    store(out + ch, acc);
  }
}

// Draw `index` (0-based) of filter.cc's splitmix64 generator seeded with `seed`: its state only
// ever adds the constant, so any draw is computed directly.
__device__ double uniform_draw(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

__device__ uint8_t noisy(uint8_t v, double mean, double stddev, double z) {
  // The CPU computes src + mean + stddev * z in double, then rounds to float.
  const double sum = __dadd_rn(__dadd_rn(static_cast<double>(v), mean), __dmul_rn(stddev, z));
  return round_u8(static_cast<float>(sum));
}

// One thread per pair of elements: Box-Muller turns draws 2i and 2i + 1 into the pair's normals.
__global__ void gaussian_noise_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                                      const NoiseParams* params) {
  const ImageJob job = jobs[blockIdx.z];
  const int64_t n = static_cast<int64_t>(job.src_height) * job.src_width * job.channels;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t i = 2 * pair;
  if (i >= n) return;
  const NoiseParams p = params[blockIdx.z];
  const double u1 = 1.0 - uniform_draw(p.seed, 2 * pair), u2 = uniform_draw(p.seed, 2 * pair + 1);
  const double radius = sqrt(-2.0 * log(u1));
  const double angle = 2.0 * 3.14159265358979323846 * u2;
  const uint8_t* in = src + job.src_offset;
  uint8_t* out = dst + job.dst_offset;
  out[i] = noisy(in[i], p.a, p.b, radius * cos(angle));
  if (i + 1 < n) out[i + 1] = noisy(in[i + 1], p.a, p.b, radius * sin(angle));
}

// One thread per pixel (or per element when per_channel): draw 2i decides a hit, 2i + 1 salt.
__global__ void salt_and_pepper_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                                       const NoiseParams* params) {
  const ImageJob job = jobs[blockIdx.z];
  const NoiseParams p = params[blockIdx.z];
  const int group = p.per_channel ? 1 : job.channels;
  const int64_t n = static_cast<int64_t>(job.src_height) * job.src_width * job.channels / group;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool hit = uniform_draw(p.seed, 2 * i) < p.a;
  const uint8_t value = uniform_draw(p.seed, 2 * i + 1) < p.b ? 255 : 0;
  const uint8_t* in = src + job.src_offset + i * group;
  uint8_t* out = dst + job.dst_offset + i * group;
  for (int k = 0; k < group; ++k) out[k] = hit ? value : in[k];
}

template <class T>
__global__ void pad_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, T fill) {
  const ImageJob job = jobs[blockIdx.z];
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x >= job.dst_width || y >= job.dst_height) return;
  const int c = job.channels;
  T* out =
      reinterpret_cast<T*>(dst + job.dst_offset) + (static_cast<size_t>(y) * job.dst_width + x) * c;
  if (y < job.src_height && x < job.src_width) {
    const T* in = reinterpret_cast<const T*>(src + job.src_offset) +
                  (static_cast<size_t>(y) * job.src_width + x) * c;
    for (int ch = 0; ch < c; ++ch) out[ch] = in[ch];
  } else {
    for (int ch = 0; ch < c; ++ch) out[ch] = fill;
  }
}

template <class To, class From>
__device__ To convert(From v) {
  if constexpr (std::is_floating_point_v<To> || !std::is_floating_point_v<From>) {
    if constexpr (std::is_same_v<To, uint8_t> && !std::is_same_v<From, uint8_t>) {
      const auto w = static_cast<int64_t>(v);
      return static_cast<To>(w < 0 ? 0 : w > 255 ? 255 : w);
    } else {
      return static_cast<To>(v);
    }
  } else {
    if (isnan(v)) return 0;
    const double r = round(static_cast<double>(v));
    constexpr double lo = std::is_same_v<To, uint8_t> ? 0.0 : -2147483648.0;
    constexpr double hi = std::is_same_v<To, uint8_t> ? 255.0 : 2147483647.0;
    return static_cast<To>(fmin(fmax(r, lo), hi));
  }
}

template <class From, class To>
__global__ void cast_kernel(const uint8_t* src, uint8_t* dst, const ImageJob* jobs) {
  const ImageJob job = jobs[blockIdx.z];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= job.src_width) return;
  const From* in = reinterpret_cast<const From*>(src + job.src_offset);
  To* out = reinterpret_cast<To*>(dst + job.dst_offset);
  out[i] = convert<To>(in[i]);
}

constexpr int kFlatBlock = 256;

dim3 flat_grid(int count, int64_t max_units) {
  return dim3(
      static_cast<unsigned>(std::max<int64_t>((max_units + kFlatBlock - 1) / kFlatBlock, 1)), 1,
      static_cast<unsigned>(count));
}

dim3 grid_for(int count, int max_height, int max_width) {
  return dim3(static_cast<unsigned>((max_width + kTile - 1) / kTile),
              static_cast<unsigned>((max_height + kTile - 1) / kTile),
              static_cast<unsigned>(count));
}

Status launched(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status();
  return unavailable_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// Launches `kernel` over `count` images on `grid` (one block per tile or per flat run) unless
// there are none; the launch error, if any, names `what`.
template <class... Params, class... Args>
Status launch(const char* what, void (*kernel)(Params...), int count, dim3 grid, dim3 block,
              void* stream, Args... args) {
  if (count == 0) return Status();
  kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(args...);
  return launched(what);
}

template <class From>
Status launch_cast_from(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, dim3 grid, DType to,
                        cudaStream_t s) {
  switch (to) {
    case DType::kU8: cast_kernel<From, uint8_t><<<grid, kFlatBlock, 0, s>>>(src, dst, jobs); break;
    case DType::kI32: cast_kernel<From, int32_t><<<grid, kFlatBlock, 0, s>>>(src, dst, jobs); break;
    case DType::kF32: cast_kernel<From, float><<<grid, kFlatBlock, 0, s>>>(src, dst, jobs); break;
    default:
      return invalid_argument_error(std::string("cast_cuda: no ") + std::string(dtype_name(to)) +
                                    " output");
  }
  return launched("cast_cuda");
}

}  // namespace

Status resize_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, int count,
                      int max_height, int max_width, Interp interp, void* stream) {
  return launch("resize_u8_cuda", resize_u8_kernel, count, grid_for(count, max_height, max_width),
                dim3(kTile, kTile), stream, src, dst, jobs, interp);
}

Status crop_flip_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int max_height,
                      int max_width, int element_size, void* stream) {
  if (count == 0) return Status();
  const dim3 grid = grid_for(count, max_height, max_width);
  const dim3 block(kTile, kTile);
  auto s = static_cast<cudaStream_t>(stream);
  auto in = static_cast<const uint8_t*>(src);
  auto out = static_cast<uint8_t*>(dst);
  switch (element_size) {
    case 1: crop_flip_kernel<uint8_t><<<grid, block, 0, s>>>(in, out, jobs); break;
    case 2: crop_flip_kernel<uint16_t><<<grid, block, 0, s>>>(in, out, jobs); break;
    case 4: crop_flip_kernel<uint32_t><<<grid, block, 0, s>>>(in, out, jobs); break;
    default:
      return invalid_argument_error("crop_flip_cuda: elements must be 1, 2 or 4 bytes, got " +
                                    std::to_string(element_size));
  }
  return launched("crop_flip_cuda");
}

Status crop_mirror_normalize_u8_cuda(const uint8_t* src, void* dst, const ImageJob* jobs, int count,
                                     int max_height, int max_width,
                                     const NormalizeConstants& constants, Layout layout,
                                     DType dtype, void* stream) {
  if (count == 0) return Status();
  const dim3 grid = grid_for(count, max_height, max_width);
  const dim3 block(kTile, kTile);
  auto s = static_cast<cudaStream_t>(stream);
  auto out = static_cast<uint8_t*>(dst);
  const bool chw = layout == Layout::kCHW;
  switch (dtype) {
    case DType::kF32:
      crop_mirror_normalize_kernel<float><<<grid, block, 0, s>>>(src, out, jobs, constants, chw);
      break;
    case DType::kF16:
      crop_mirror_normalize_kernel<__half><<<grid, block, 0, s>>>(src, out, jobs, constants, chw);
      break;
    case DType::kU8:
      crop_mirror_normalize_kernel<uint8_t><<<grid, block, 0, s>>>(src, out, jobs, constants, chw);
      break;
    default:
      return invalid_argument_error(std::string("crop_mirror_normalize_u8_cuda: no ") +
                                    std::string(dtype_name(dtype)) + " output");
  }
  return launched("crop_mirror_normalize_u8_cuda");
}

Status lut_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, const uint8_t* luts,
                   int count, int max_height, int max_width, void* stream) {
  return launch("lut_u8_cuda", lut_u8_kernel, count, grid_for(count, max_height, max_width),
                dim3(kTile, kTile), stream, src, dst, jobs, luts);
}

Status color_matrix_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                            const float* matrices, int count, int max_height, int max_width,
                            void* stream) {
  return launch("color_matrix_u8_cuda", color_matrix_u8_kernel, count,
                grid_for(count, max_height, max_width), dim3(kTile, kTile), stream, src, dst, jobs,
                matrices);
}

Status warp_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, const double* warps,
                    int count, int max_height, int max_width, void* stream) {
  return launch("warp_u8_cuda", warp_u8_kernel, count, grid_for(count, max_height, max_width),
                dim3(kTile, kTile), stream, src, dst, jobs, warps);
}

Status blur_u8_cuda(const uint8_t* src, uint8_t* dst, float* scratch, const ImageJob* jobs,
                    const void* taps, int count, int max_height, int max_width, void* stream) {
  if (count == 0) return Status();
  const dim3 grid = grid_for(count, max_height, max_width);
  const dim3 block(kTile, kTile);
  auto s = static_cast<cudaStream_t>(stream);
  const auto* index = static_cast<const int2*>(taps);
  const auto* weights = reinterpret_cast<const float*>(index + count);
  blur_pass_kernel<uint8_t, float, true><<<grid, block, 0, s>>>(src, scratch, jobs, index, weights);
  KILN_RETURN_IF_ERROR(launched("blur_u8_cuda"));
  blur_pass_kernel<float, uint8_t, false>
      <<<grid, block, 0, s>>>(scratch, dst, jobs, index, weights);
  return launched("blur_u8_cuda");
}

Status gaussian_noise_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                              const NoiseParams* params, int count, int64_t max_elements,
                              void* stream) {
  return launch("gaussian_noise_u8_cuda", gaussian_noise_kernel, count,
                flat_grid(count, (max_elements + 1) / 2), dim3(kFlatBlock), stream, src, dst, jobs,
                params);
}

Status salt_and_pepper_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                               const NoiseParams* params, int count, int64_t max_elements,
                               void* stream) {
  return launch("salt_and_pepper_u8_cuda", salt_and_pepper_kernel, count,
                flat_grid(count, max_elements), dim3(kFlatBlock), stream, src, dst, jobs, params);
}

Status pad_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int max_height,
                int max_width, int element_size, uint32_t fill, void* stream) {
  if (count == 0) return Status();
  const dim3 grid = grid_for(count, max_height, max_width);
  const dim3 block(kTile, kTile);
  auto s = static_cast<cudaStream_t>(stream);
  auto in = static_cast<const uint8_t*>(src);
  auto out = static_cast<uint8_t*>(dst);
  switch (element_size) {
    case 1:
      pad_kernel<uint8_t><<<grid, block, 0, s>>>(in, out, jobs, static_cast<uint8_t>(fill));
      break;
    case 4: pad_kernel<uint32_t><<<grid, block, 0, s>>>(in, out, jobs, fill); break;
    default:
      return invalid_argument_error("pad_cuda: elements must be 1 or 4 bytes, got " +
                                    std::to_string(element_size));
  }
  return launched("pad_cuda");
}

Status cast_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int64_t max_elements,
                 DType from, DType to, void* stream) {
  if (count == 0) return Status();
  const dim3 grid = flat_grid(count, max_elements);
  auto s = static_cast<cudaStream_t>(stream);
  auto in = static_cast<const uint8_t*>(src);
  auto out = static_cast<uint8_t*>(dst);
  switch (from) {
    case DType::kU8: return launch_cast_from<uint8_t>(in, out, jobs, grid, to, s);
    case DType::kI32: return launch_cast_from<int32_t>(in, out, jobs, grid, to, s);
    case DType::kF32: return launch_cast_from<float>(in, out, jobs, grid, to, s);
    default:
      return invalid_argument_error(std::string("cast_cuda: no ") + std::string(dtype_name(from)) +
                                    " input");
  }
}

}  // namespace kiln::pipeline::kernels::cuda
