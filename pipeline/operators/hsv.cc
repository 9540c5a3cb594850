// SPDX-License-Identifier: Apache-2.0
// hsv: DALI's hue rotation, saturation and value scaling of RGB images (a YIQ-space matrix).
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {

namespace {

class Hsv final : public ColorOperator {
 public:
  using ColorOperator::ColorOperator;

 private:
  bool by_table() const override { return false; }
  Result<ColorMap> color_map(const OpArgs& args) const override {
    return ColorMap{std::nullopt,
                    kernels::hsv_matrix(args.get_float("hue"), args.get_float("saturation"),
                                        args.get_float("value"))};
  }
};

}  // namespace

const OperatorSchema& hsv_schema() {
  static const OperatorSchema schema{
      "hsv",
      "rotates hue and scales saturation and value of RGB images",
      {"images"},
      {"images"},
      {
          {"hue", ArgType::kFloat, 0.0, "hue rotation in degrees", true},
          {"saturation", ArgType::kFloat, 1.0, "saturation multiplier (0: gray)", true},
          {"value", ArgType::kFloat, 1.0, "value (brightness) multiplier", true},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_hsv(OpArgs args) {
  return std::unique_ptr<Operator>(new Hsv(std::move(args)));
}

}  // namespace kiln::pipeline::detail
