// SPDX-License-Identifier: Apache-2.0
// color_twist: hue, saturation, brightness and contrast of RGB images in one matrix pass.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class ColorTwist final : public ColorOperator {
 public:
  using ColorOperator::ColorOperator;

 private:
  bool by_table() const override { return false; }
  Result<ColorMap> color_map(const OpArgs& args) const override {
    return ColorMap{std::nullopt, kernels::then_brightness_contrast(
                                      kernels::hsv_matrix(args.get_float("hue"),
                                                          args.get_float("saturation"), 1.0),
                                      args.get_float("brightness"), 0.0, args.get_float("contrast"),
                                      args.get_float("contrast_center"))};
  }
};

}  // namespace

const OperatorSchema& color_twist_schema() {
  static const OperatorSchema schema{
      "color_twist",
      "hue, saturation, then brightness and contrast of RGB images, fused",
      {"images"},
      {"images"},
      {
          {"brightness", ArgType::kFloat, 1.0, "multiplier of the result", true},
          {"contrast", ArgType::kFloat, 1.0, "stretch around contrast_center", true},
          {"hue", ArgType::kFloat, 0.0, "hue rotation in degrees", true},
          {"saturation", ArgType::kFloat, 1.0, "saturation multiplier (0: gray)", true},
          {"contrast_center", ArgType::kFloat, 128.0, "the value contrast keeps fixed"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_color_twist(OpArgs args) {
  return std::unique_ptr<Operator>(new ColorTwist(std::move(args)));
}

}  // namespace kiln::pipeline::detail
