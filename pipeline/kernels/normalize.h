// SPDX-License-Identifier: Apache-2.0
// Fused crop + mirror + normalize + layout (HWC/CHW) + dtype (float32/float16/uint8) in one pass.
#pragma once

#include <span>

#include "core/tensor.h"
#include "pipeline/kernels/crop_flip.h"

namespace kiln::pipeline::kernels {

enum class Layout { kHWC, kCHW };

// For every output pixel: out = (in[window, mirrored] - mean[c]) / std[c].
// `in` is [H, W, C] uint8; `out` is [h, w, C] (kHWC) or [C, h, w] (kCHW) of float32, float16
// (the float32 result rounded to nearest even) or uint8 (rounds half away from zero, saturates).
// `mean` and `stddev` hold C values each (or one value used for every channel); stddev must be
// non-zero. Shapes are checked.
void crop_mirror_normalize_u8(const TensorView& in, const TensorView& out, const Window& window,
                              bool mirror, std::span<const float> mean,
                              std::span<const float> stddev, Layout layout);

}  // namespace kiln::pipeline::kernels
