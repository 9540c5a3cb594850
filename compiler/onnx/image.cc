// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the image op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/image.h"

#include <array>

#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

namespace {

// Resize-10 and every Upsample: `mode` only, asymmetric coordinates, and nearest rounds down
// (output index i reads input floor(i / scale), as Upsample's numpy reference does).
Result<ops::Resize> legacy_resize(NodeImporter& ni, std::span<const std::string_view> ignore) {
  // Upsample's struct holds exactly the legacy attribute set, so it validates the node's.
  KILN_ASSIGN_OR_RETURN(Op legacy, ni.make_op(OpKind::kUpsample, ignore));
  std::string mode = legacy.as<ops::Upsample>().mode;
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear") {
    return ni.errorf("expected mode nearest or linear, got \"{}\"", mode);
  }
  ops::Resize op;
  op.mode = mode;
  op.coordinate_transformation_mode = "asymmetric";
  op.nearest_mode = "floor";
  return op;
}

Status import_scales_input(NodeImporter& ni) {
  if (!ni.has_input(0) || !ni.has_input(1)) return ni.error("expected inputs X and scales");
  KILN_ASSIGN_OR_RETURN(ops::Resize op, legacy_resize(ni, {}));
  return ni.emit(op, {ni.input(0), nullptr, ni.input(1)}).status();
}

Status import_upsample_7(NodeImporter& ni) {
  static constexpr std::array<std::string_view, 1> kIgnore = {"scales"};
  KILN_ASSIGN_OR_RETURN(ops::Resize op, legacy_resize(ni, kIgnore));
  std::optional<std::vector<float>> scales = ni.floats_attr("scales");
  if (!ni.has_input(0) || !scales) return ni.error("expected input X and attribute scales");
  Value* s = ni.constant(Tensor::from_vector(*scales));
  return ni.emit(op, {ni.input(0), nullptr, s}).status();
}

Status import_upsample_1(NodeImporter& ni) {
  static constexpr std::array<std::string_view, 2> kIgnore = {"height_scale", "width_scale"};
  KILN_ASSIGN_OR_RETURN(ops::Resize op, legacy_resize(ni, kIgnore));
  std::optional<float> h = ni.float_attr("height_scale");
  std::optional<float> w = ni.float_attr("width_scale");
  if (!ni.has_input(0) || !h || !w) {
    return ni.error("expected input X and attributes height_scale and width_scale");
  }
  Value* s = ni.constant(Tensor::from_vector(std::vector<float>{1.0f, 1.0f, *h, *w}));
  return ni.emit(op, {ni.input(0), nullptr, s}).status();
}

// RoiAlign before opset 16 always used output_half_pixel coordinates (no attribute).
Status import_roi_align_10(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kRoiAlign));
  if (ni.has_attr("coordinate_transformation_mode")) {
    return ni.errorf(
        "attribute \"coordinate_transformation_mode\" needs opset 16, the model "
        "imports opset {}",
        ni.opset());
  }
  ops::RoiAlign op = generic.as<ops::RoiAlign>();
  op.coordinate_transformation_mode = "output_half_pixel";
  return ni.emit(op, ni.inputs()).status();
}

}  // namespace

std::vector<OpsetImporter> image_importers() {
  return {
      {"", "Resize", 10, 10, import_scales_input},   {"", "Upsample", 1, 6, import_upsample_1},
      {"", "Upsample", 7, 8, import_upsample_7},     {"", "Upsample", 9, kLatestOpset, import_scales_input},
      {"", "RoiAlign", 10, 15, import_roi_align_10},
  };
}

}  // namespace kiln::compiler
