// SPDX-License-Identifier: Apache-2.0
// Launchers for the batched image kernels on the GPU: one launch covers a ragged batch of images.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "pipeline/kernels/normalize.h"
#include "pipeline/kernels/resize.h"

namespace kiln::pipeline::kernels::cuda {

// What one kernel does to one image of a batch. Images are HWC; offsets are in bytes from the
// batch's base pointers. The window lies inside the source image; the output is [dst_height,
// dst_width, channels] (or [channels, dst_height, dst_width] for a CHW normalize).
struct ImageJob {
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int32_t src_height = 0;
  int32_t src_width = 0;
  int32_t channels = 0;
  int32_t win_y = 0;
  int32_t win_x = 0;
  int32_t win_height = 0;
  int32_t win_width = 0;
  int32_t dst_height = 0;
  int32_t dst_width = 0;
  int32_t mirror = 0;         // left-right
  int32_t flip_vertical = 0;  // upside-down
};

// Per-channel constants of a normalize (up to 4 channels): out = (in - mean) * scale.
struct NormalizeConstants {
  float mean[4] = {0, 0, 0, 0};
  float scale[4] = {1, 1, 1, 1};
};

// The largest channel count the kernels take.
inline constexpr int kMaxGpuChannels = 4;

// Each launcher enqueues one kernel on `stream` (a cudaStream_t) over `count` jobs, whose table
// `jobs` lies in device memory; `max_height`/`max_width` bound every job's output. They return
// the launch error, if any; execution errors surface at the stream's next synchronization.

// uint8 -> uint8: the window resized to the output size, with the CPU kernel's taps and rounding
// (kernels/resize.h), so results equal resize_window_u8's.
Status resize_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, int count,
                      int max_height, int max_width, Interp interp, void* stream);

// The window copied, mirrored and/or flipped, elements of `element_size` bytes (1, 2 or 4).
Status crop_flip_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int max_height,
                      int max_width, int element_size, void* stream);

// uint8 -> float32 / float16 / uint8: the window (mirrored when asked) normalized, in HWC or CHW,
// with normalize.h's arithmetic and rounding.
Status crop_mirror_normalize_u8_cuda(const uint8_t* src, void* dst, const ImageJob* jobs, int count,
                                     int max_height, int max_width,
                                     const NormalizeConstants& constants, Layout layout,
                                     DType dtype, void* stream);

// uint8 -> uint8, every value through its image's 256-entry table (`luts`: 256 bytes per job,
// in device memory); whole images (the window is the image).
Status lut_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, const uint8_t* luts,
                   int count, int max_height, int max_width, void* stream);

// RGB uint8 -> uint8: out = round(m * in + offset), saturated, with color.h's order of
// operations; `matrices` holds 12 floats per job (row-major m, then offset) in device memory.
Status color_matrix_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                            const float* matrices, int count, int max_height, int max_width,
                            void* stream);

// uint8 -> uint8 affine warp with warp.h's arithmetic: `warps` holds 8 doubles per job (the
// output -> input map m0..m5, then 1 for bilinear or 0 for nearest, then the fill value).
Status warp_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs, const double* warps,
                    int count, int max_height, int max_width, void* stream);

// uint8 -> uint8 separable blur with filter.h's arithmetic (a vertical pass into `scratch`, float
// values at 4x each output's byte offset, then a horizontal pass; borders reflect-101). `taps`
// holds, per job, an int2 {first tap's index, tap count} (count odd), followed by every job's
// taps as floats, in device memory.
Status blur_u8_cuda(const uint8_t* src, uint8_t* dst, float* scratch, const ImageJob* jobs,
                    const void* taps, int count, int max_height, int max_width, void* stream);

// Per-image noise parameters: the sample's seed and, for gaussian noise, mean and stddev; for salt
// and pepper, prob and salt_vs_pepper (filter.h's draws, in the same order).
struct NoiseParams {
  uint64_t seed = 0;
  double a = 0.0;
  double b = 0.0;
  int32_t per_channel = 0;
};

// uint8 -> uint8 noise over whole images, each element's draws the ones filter.h's sequential
// generator gives it; `params` holds one NoiseParams per job in device memory. `max_elements`
// bounds every image's element count.
Status gaussian_noise_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                              const NoiseParams* params, int count, int64_t max_elements,
                              void* stream);
Status salt_and_pepper_u8_cuda(const uint8_t* src, uint8_t* dst, const ImageJob* jobs,
                               const NoiseParams* params, int count, int64_t max_elements,
                               void* stream);

// Each whole image placed at the top left of its larger output, the rest `fill` (the element's
// bits: 1 byte for uint8, 4 for float32).
Status pad_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int max_height,
                int max_width, int element_size, uint32_t fill, void* stream);

// Element-wise conversion between uint8, int32 and float32 with kernels/warp.h's cast rules (float
// to integer rounds half away from zero and saturates, NaN gives 0). Job i converts src_width
// elements (src_height 1) from src_offset to dst_offset.
Status cast_cuda(const void* src, void* dst, const ImageJob* jobs, int count, int64_t max_elements,
                 DType from, DType to, void* stream);

}  // namespace kiln::pipeline::kernels::cuda
