// SPDX-License-Identifier: Apache-2.0
// gamma: out = 255 * (in / 255) ^ gamma on uint8 images of any channels (rocAL's gamma).
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Gamma final : public ColorOperator {
 public:
  using ColorOperator::ColorOperator;

 private:
  bool by_table() const override { return true; }
  Result<ColorMap> color_map(const OpArgs& args) const override {
    const double gamma = args.get_float("gamma");
    if (!(gamma > 0.0)) {
      return invalid_argument_error(
          fmt::format("operator gamma: gamma must be > 0, got {}", gamma));
    }
    return ColorMap{kernels::gamma_lut(gamma), {}};
  }
};

}  // namespace

const OperatorSchema& gamma_schema() {
  static const OperatorSchema schema{
      "gamma",
      "gamma correction: out = 255 * (in / 255) ^ gamma",
      {"images"},
      {"images"},
      {{"gamma", ArgType::kFloat, 1.0, "the exponent, > 0 (< 1 brightens)", true}}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_gamma(OpArgs args) {
  return std::unique_ptr<Operator>(new Gamma(std::move(args)));
}

}  // namespace kiln::pipeline::detail
