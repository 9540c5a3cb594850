// SPDX-License-Identifier: Apache-2.0
// The image op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Resize: see the ONNX operator documentation (opset 19). The scales, sizes and roi inputs list the
// axes in `axes` (every axis when absent); compiler/ops/image_util.h turns them into one scale and
// size per axis.
struct Resize {
  static constexpr OpKind kKind = OpKind::kResize;
  int64_t antialias = 0;
  std::optional<std::vector<int64_t>> axes;
  std::string coordinate_transformation_mode = "half_pixel";
  float cubic_coeff_a = -0.75f;
  int64_t exclude_outside = 0;
  float extrapolation_value = 0.0f;
  std::string keep_aspect_ratio_policy = "stretch";
  std::string mode = "nearest";
  std::string nearest_mode = "round_prefer_floor";

  template <class V>
  void reflect(V& v) {
    v("antialias", antialias);
    v("axes", axes);
    v("coordinate_transformation_mode", coordinate_transformation_mode);
    v("cubic_coeff_a", cubic_coeff_a);
    v("exclude_outside", exclude_outside);
    v("extrapolation_value", extrapolation_value);
    v("keep_aspect_ratio_policy", keep_aspect_ratio_policy);
    v("mode", mode);
    v("nearest_mode", nearest_mode);
  }
};

// Upsample: see the ONNX operator documentation (opset 10).
struct Upsample {
  static constexpr OpKind kKind = OpKind::kUpsample;
  std::string mode = "nearest";

  template <class V>
  void reflect(V& v) {
    v("mode", mode);
  }
};

// GridSample: see the ONNX operator documentation (opset 16).
struct GridSample {
  static constexpr OpKind kKind = OpKind::kGridSample;
  int64_t align_corners = 0;
  std::string mode = "bilinear";
  std::string padding_mode = "zeros";

  template <class V>
  void reflect(V& v) {
    v("align_corners", align_corners);
    v("mode", mode);
    v("padding_mode", padding_mode);
  }
};

// RoiAlign: see the ONNX operator documentation (opset 16).
struct RoiAlign {
  static constexpr OpKind kKind = OpKind::kRoiAlign;
  std::string coordinate_transformation_mode = "half_pixel";
  std::string mode = "avg";
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;
  float spatial_scale = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("coordinate_transformation_mode", coordinate_transformation_mode);
    v("mode", mode);
    v("output_height", output_height);
    v("output_width", output_width);
    v("sampling_ratio", sampling_ratio);
    v("spatial_scale", spatial_scale);
  }
};

// NonMaxSuppression: see the ONNX operator documentation (opset 11).
struct NonMaxSuppression {
  static constexpr OpKind kKind = OpKind::kNonMaxSuppression;
  int64_t center_point_box = 0;

  template <class V>
  void reflect(V& v) {
    v("center_point_box", center_point_box);
  }
};

}  // namespace kiln::compiler::ops
