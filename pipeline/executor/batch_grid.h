// SPDX-License-Identifier: Apache-2.0
// Draws a batch of images as one picture (a grid of tiles) and writes it as a PNG.
#pragma once

#include <string>

#include "core/status.h"
#include "pipeline/executor/pipeline.h"

namespace kiln::pipeline {

// Tiles the samples of `images` (each [H, W, C] or [C, H, W] with C = 1 or 3, uint8 or float32;
// samples may differ in size) into a grid about as wide as it is tall, 2 px apart, and writes it
// to `path` as an 8-bit PNG. Float samples are stretched from their own min..max to 0..255, so
// normalized tensors stay visible. Errors name the path, or say which sample cannot be drawn.
Status save_batch_grid(const TensorList& images, const std::string& path);

}  // namespace kiln::pipeline
