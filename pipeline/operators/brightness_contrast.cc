// SPDX-License-Identifier: Apache-2.0
// brightness_contrast: DALI's per-sample brightness and contrast on uint8 images of any channels.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class BrightnessContrast final : public ColorOperator {
 public:
  using ColorOperator::ColorOperator;

 private:
  bool by_table() const override { return true; }
  Result<ColorMap> color_map(const OpArgs& args) const override {
    return ColorMap{kernels::brightness_contrast_lut(
                        args.get_float("brightness"), args.get_float("brightness_shift"),
                        args.get_float("contrast"), args.get_float("contrast_center")),
                    {}};
  }
};

}  // namespace

const OperatorSchema& brightness_contrast_schema() {
  static const OperatorSchema schema{
      "brightness_contrast",
      "out = brightness_shift * 255 + brightness * (center + contrast * (in - center))",
      {"images"},
      {"images"},
      {
          {"brightness", ArgType::kFloat, 1.0, "multiplier of the result", true},
          {"brightness_shift", ArgType::kFloat, 0.0, "added, as a fraction of 255", true},
          {"contrast", ArgType::kFloat, 1.0, "stretch around contrast_center", true},
          {"contrast_center", ArgType::kFloat, 128.0, "the value contrast keeps fixed"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_brightness_contrast(OpArgs args) {
  return std::unique_ptr<Operator>(new BrightnessContrast(std::move(args)));
}

}  // namespace kiln::pipeline::detail
