// SPDX-License-Identifier: Apache-2.0
// Crop window selection shared by crop, crop_mirror_normalize and decoders.image_random_crop.
#include "pipeline/operators/crop_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::pipeline {

Result<kernels::Window> anchored_window(std::string_view op, int64_t height, int64_t width,
                                        int64_t crop_h, int64_t crop_w, double pos_x,
                                        double pos_y) {
  if (crop_h > height || crop_w > width) {
    return invalid_argument_error(
        fmt::format("operator {}: crop {}x{} (HxW) is larger than the "
                    "{}x{} image",
                    op, crop_h, crop_w, height, width));
  }
  if (!(pos_x >= 0.0 && pos_x <= 1.0 && pos_y >= 0.0 && pos_y <= 1.0)) {
    return invalid_argument_error(fmt::format(
        "operator {}: crop_pos_x {} and crop_pos_y {} must be in [0, 1]", op, pos_x, pos_y));
  }
  kernels::Window w;
  w.height = crop_h;
  w.width = crop_w;
  w.y = std::llround(pos_y * static_cast<double>(height - crop_h));
  w.x = std::llround(pos_x * static_cast<double>(width - crop_w));
  return w;
}

Result<kernels::RelWindow> relative_window(std::string_view op, const Tensor& anchor,
                                           const Tensor& shape) {
  for (const Tensor* t : {&anchor, &shape}) {
    if (t->dtype() != DType::kF32 || t->numel() != 2) {
      return invalid_argument_error(fmt::format(
          "operator {}: anchor and shape must be 2 float32 values ([x, y], [width, height]), "
          "got {} {}",
          op, dtype_name(t->dtype()), t->shape().to_string()));
    }
  }
  const float* a = anchor.data<float>();
  const float* s = shape.data<float>();
  constexpr double kSlack = 1e-6;  // float rounding of anchor + shape
  if (!(a[0] >= 0.0f && a[1] >= 0.0f && s[0] > 0.0f && s[1] > 0.0f &&
        double{a[0]} + s[0] <= 1.0 + kSlack && double{a[1]} + s[1] <= 1.0 + kSlack)) {
    return invalid_argument_error(
        fmt::format("operator {}: window anchor ({}, {}) shape ({}, {}) is not inside [0, 1]", op,
                    a[0], a[1], s[0], s[1]));
  }
  return kernels::RelWindow{a[0], a[1], s[0], s[1]};
}

kernels::Window pixel_window(const kernels::RelWindow& window, int64_t height, int64_t width) {
  auto edges = [](double start, double size, int64_t extent) {
    const auto n = static_cast<double>(extent);
    int64_t lo = std::clamp<int64_t>(std::llround(start * n), 0, extent - 1);
    int64_t hi = std::clamp<int64_t>(std::llround((start + size) * n), lo + 1, extent);
    return std::pair{lo, hi - lo};
  };
  auto [x, w] = edges(window.x, window.width, width);
  auto [y, h] = edges(window.y, window.height, height);
  return kernels::Window{y, x, h, w};
}

kernels::Window random_resized_crop_window(int64_t height, int64_t width,
                                           const RandomCropParams& params, SampleRng& rng) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(params.aspect_min), log_hi = std::log(params.aspect_max);
  for (int64_t attempt = 0; attempt < params.num_attempts; ++attempt) {
    double target = area * rng.uniform(params.area_min, params.area_max);
    double aspect = std::exp(rng.uniform(log_lo, log_hi));
    int64_t w = std::llround(std::sqrt(target * aspect));
    int64_t h = std::llround(std::sqrt(target / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      kernels::Window win;
      win.height = h;
      win.width = w;
      win.y = rng.uniform_int(0, height - h);
      win.x = rng.uniform_int(0, width - w);
      return win;
    }
  }
  const double ratio = static_cast<double>(width) / static_cast<double>(height);
  kernels::Window win;
  if (ratio < params.aspect_min) {
    win.width = width;
    win.height = std::clamp<int64_t>(std::llround(width / params.aspect_min), 1, height);
  } else if (ratio > params.aspect_max) {
    win.height = height;
    win.width = std::clamp<int64_t>(std::llround(height * params.aspect_max), 1, width);
  } else {
    win.width = width;
    win.height = height;
  }
  win.y = (height - win.height) / 2;
  win.x = (width - win.width) / 2;
  return win;
}

}  // namespace kiln::pipeline
