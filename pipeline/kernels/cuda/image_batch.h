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

}  // namespace kiln::pipeline::kernels::cuda
