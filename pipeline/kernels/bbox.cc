// SPDX-License-Identifier: Apache-2.0
// Box flips, overlaps and crops in relative coordinates.
#include "pipeline/kernels/bbox.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::pipeline::kernels {
namespace {

struct Ltrb {
  double l, t, r, b;
};

Ltrb to_ltrb(const float* box, BoxLayout layout) {
  if (layout == BoxLayout::kLTRB) return {box[0], box[1], box[2], box[3]};
  return {box[0], box[1], double{box[0]} + box[2], double{box[1]} + box[3]};
}

void from_ltrb(const Ltrb& box, BoxLayout layout, float* out) {
  out[0] = static_cast<float>(box.l);
  out[1] = static_cast<float>(box.t);
  out[2] = static_cast<float>(layout == BoxLayout::kLTRB ? box.r : box.r - box.l);
  out[3] = static_cast<float>(layout == BoxLayout::kLTRB ? box.b : box.b - box.t);
}

double area(const Ltrb& b) {
  return std::max(b.r - b.l, 0.0) * std::max(b.b - b.t, 0.0);
}

Ltrb intersect(const Ltrb& a, const RelWindow& w) {
  return {std::max(a.l, w.x), std::max(a.t, w.y), std::min(a.r, w.x + w.width),
          std::min(a.b, w.y + w.height)};
}

}  // namespace

void flip_boxes(std::span<float> boxes, BoxLayout layout, bool horizontal, bool vertical) {
  KILN_CHECK(boxes.size() % 4 == 0, "flip_boxes: 4 floats per box");
  for (size_t i = 0; i < boxes.size(); i += 4) {
    Ltrb b = to_ltrb(&boxes[i], layout);
    if (horizontal) b = {1.0 - b.r, b.t, 1.0 - b.l, b.b};
    if (vertical) b = {b.l, 1.0 - b.b, b.r, 1.0 - b.t};
    from_ltrb(b, layout, &boxes[i]);
  }
}

double box_window_overlap(const float* box, BoxLayout layout, const RelWindow& window,
                          bool over_box) {
  const Ltrb b = to_ltrb(box, layout);
  const double inter = area(intersect(b, window));
  const double denom = over_box ? area(b) : area(b) + window.width * window.height - inter;
  return denom > 0.0 ? inter / denom : 0.0;
}

std::vector<int64_t> crop_boxes(std::span<const float> boxes, BoxLayout layout,
                                const RelWindow& window, double prune_threshold,
                                std::vector<float>* out) {
  KILN_CHECK(boxes.size() % 4 == 0, "crop_boxes: 4 floats per box");
  std::vector<int64_t> kept;
  for (size_t i = 0; i < boxes.size(); i += 4) {
    const Ltrb b = to_ltrb(&boxes[i], layout);
    bool keep;
    if (prune_threshold >= 0.0) {
      keep = box_window_overlap(&boxes[i], layout, window, true) >= prune_threshold;
    } else {
      const double cx = 0.5 * (b.l + b.r), cy = 0.5 * (b.t + b.b);
      keep = cx >= window.x && cx <= window.x + window.width && cy >= window.y &&
             cy <= window.y + window.height;
    }
    if (!keep) continue;
    const Ltrb c = intersect(b, window);
    const Ltrb mapped{(c.l - window.x) / window.width, (c.t - window.y) / window.height,
                      (std::max(c.r, c.l) - window.x) / window.width,
                      (std::max(c.b, c.t) - window.y) / window.height};
    out->resize(out->size() + 4);
    from_ltrb(mapped, layout, out->data() + out->size() - 4);
    kept.push_back(static_cast<int64_t>(i / 4));
  }
  return kept;
}

}  // namespace kiln::pipeline::kernels
