// SPDX-License-Identifier: Apache-2.0
// Resize geometry: axes, scales or sizes, and the keep_aspect_ratio_policy of opset 18.
#include "compiler/ops/image_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::compiler {

Result<ResizeGeometry> resize_geometry(const ops::Resize& op, std::span<const int64_t> in,
                                       const std::vector<double>* scales,
                                       const std::vector<int64_t>* sizes,
                                       const std::vector<double>& roi) {
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (op.axes) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t a : *op.axes) {
      if (a < -rank || a >= rank) {
        return invalid_argument_error(fmt::format("axis {} is out of range for rank {}", a, rank));
      }
      if (a < 0) a += rank;
      if (seen[static_cast<size_t>(a)]) {
        return invalid_argument_error(fmt::format("axis {} is listed twice", a));
      }
      seen[static_cast<size_t>(a)] = true;
      axes.push_back(a);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  const size_t n = axes.size();
  const size_t given = scales != nullptr ? scales->size() : sizes->size();
  if (given != n) {
    return invalid_argument_error(fmt::format("expected {} {} (one per resized axis), got {}", n,
                                              scales != nullptr ? "scales" : "sizes", given));
  }
  if (!roi.empty() && roi.size() != 2 * n) {
    return invalid_argument_error(
        fmt::format("expected {} roi values (starts and ends), got {}", 2 * n, roi.size()));
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  ResizeGeometry g;
  g.scales.assign(static_cast<size_t>(rank), 1.0);
  g.sizes.assign(in.begin(), in.end());
  if (!roi.empty()) {
    g.roi.assign(static_cast<size_t>(rank), 0.0);
    g.roi.resize(static_cast<size_t>(2 * rank), 1.0);
    for (size_t i = 0; i < n; ++i) {
      g.roi[static_cast<size_t>(axes[i])] = roi[i];
      g.roi[static_cast<size_t>(axes[i] + rank)] = roi[i + n];
    }
  }
  if (scales != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      const double s = (*scales)[i];
      if (!(s > 0) || !std::isfinite(s)) {
        return invalid_argument_error(fmt::format("expected positive scales, got {}", s));
      }
      const auto a = static_cast<size_t>(axes[i]);
      g.scales[a] = s;
      if (in[a] < 0) continue;
      double extent = g.roi.empty() ? 1.0 : g.roi[a + static_cast<size_t>(rank)] - g.roi[a];
      if (op.coordinate_transformation_mode != "tf_crop_and_resize") extent = 1.0;
      const double size = static_cast<double>(in[a]) * extent * s;
      if (!(size >= 0) || size > 9.0e15) {
        return invalid_argument_error(fmt::format("scale {} gives an invalid size for axis {}", s, a));
      }
      g.sizes[a] = static_cast<int64_t>(std::floor(size));
    }
    return g;
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = (*sizes)[i];
    if (s < 0) return invalid_argument_error(fmt::format("expected sizes >= 0, got {}", s));
    const auto a = static_cast<size_t>(axes[i]);
    g.sizes[a] = s;
    g.scales[a] = in[a] > 0 ? static_cast<double>(s) / static_cast<double>(in[a]) : kNaN;
  }
  if (op.keep_aspect_ratio_policy == "stretch") return g;
  // One scale for every resized axis: the smallest (not_larger) or largest (not_smaller) of theirs.
  double scale = op.keep_aspect_ratio_policy == "not_larger" ? std::numeric_limits<double>::infinity()
                                                             : 0.0;
  for (int64_t a : axes) {
    const double s = g.scales[static_cast<size_t>(a)];
    if (std::isnan(s)) scale = kNaN;
    if (std::isnan(scale)) break;
    scale = op.keep_aspect_ratio_policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  for (int64_t a : axes) {
    const auto u = static_cast<size_t>(a);
    g.scales[u] = scale;
    g.sizes[u] = std::isnan(scale) ? -1
                                   : static_cast<int64_t>(std::floor(scale * static_cast<double>(in[u]) + 0.5));
  }
  return g;
}

}  // namespace kiln::compiler
