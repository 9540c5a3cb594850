// SPDX-License-Identifier: Apache-2.0
// Bounding boxes in coordinates relative to the image (0..1): flips, overlaps and crops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::pipeline::kernels {

// How 4 floats describe a box: [x, y, width, height] or [left, top, right, bottom].
enum class BoxLayout { kXYWH, kLTRB };

// A window in relative coordinates: [x, x + width) x [y, y + height).
struct RelWindow {
  double x = 0.0;
  double y = 0.0;
  double width = 1.0;
  double height = 1.0;
};

// Mirrors `boxes` (4 floats each) in place: x -> 1 - x horizontally, y -> 1 - y vertically.
void flip_boxes(std::span<float> boxes, BoxLayout layout, bool horizontal, bool vertical);

// The overlap of `box` (4 floats in `layout`) with `window`: intersection over union, or (when
// `over_box`) the fraction of the box's area inside the window. 0 for an empty box.
double box_window_overlap(const float* box, BoxLayout layout, const RelWindow& window,
                          bool over_box);

// Crops boxes to `window` as the image is cropped (DALI's semantics): a box is kept when its
// centre lies inside the window (borders included), or with prune_threshold >= 0 when at least
// that fraction of its area does; kept boxes are clipped to the window and mapped to its
// coordinates (the window becomes 0..1). Appends kept boxes to `out` (same layout) and returns
// their indices in `boxes`.
std::vector<int64_t> crop_boxes(std::span<const float> boxes, BoxLayout layout,
                                const RelWindow& window, double prune_threshold,
                                std::vector<float>* out);

}  // namespace kiln::pipeline::kernels
