// SPDX-License-Identifier: Apache-2.0
// Chooses crop windows: anchored crops (crop_pos_x/y) and torchvision's RandomResizedCrop.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "pipeline/kernels/bbox.h"
#include "pipeline/kernels/crop_flip.h"
#include "pipeline/operators/operator.h"

namespace kiln::pipeline {

// A crop_h x crop_w window whose top-left corner sits at fraction (pos_x, pos_y) in [0, 1] of the
// free space (0.5: centred). Errors (naming `op`) when the crop is larger than the image or a
// position is outside [0, 1].
Result<kernels::Window> anchored_window(std::string_view op, int64_t height, int64_t width,
                                        int64_t crop_h, int64_t crop_w, double pos_x, double pos_y);

// The relative window that `anchor` ([x, y]) and `shape` ([width, height]) give, float tensors of
// two values (DALI's normalized slice arguments). Errors (naming `op`) for other shapes or a window
// outside [0, 1].
Result<kernels::RelWindow> relative_window(std::string_view op, const Tensor& anchor,
                                           const Tensor& shape);

// `window` in pixels of a height x width image: edges rounded to the nearest pixel, at least one
// pixel each way.
kernels::Window pixel_window(const kernels::RelWindow& window, int64_t height, int64_t width);

struct RandomCropParams {
  double area_min = 0.08, area_max = 1.0;                 // fraction of the image area
  double aspect_min = 3.0 / 4.0, aspect_max = 4.0 / 3.0;  // width / height
  int64_t num_attempts = 10;
};

// torchvision's RandomResizedCrop.get_params: up to num_attempts draws of (area, log-uniform
// aspect); the first that fits wins, else a centre crop clamped to the aspect range.
kernels::Window random_resized_crop_window(int64_t height, int64_t width,
                                           const RandomCropParams& params, SampleRng& rng);

}  // namespace kiln::pipeline
