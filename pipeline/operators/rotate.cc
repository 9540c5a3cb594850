// SPDX-License-Identifier: Apache-2.0
// rotate: turns uint8 images counter-clockwise about their centre by a per-sample angle.
#include <fmt/format.h>

#include <cmath>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/warp.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Rotate final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("rotate", in, true));
    const double angle = args.get_float("angle");
    if (!std::isfinite(angle)) {
      return invalid_argument_error(
          fmt::format("operator rotate: angle must be finite, got {}", angle));
    }
    const int64_t h = in.shape()[0], w = in.shape()[1];
    const auto& size = args.get_ints("size");
    std::array<int64_t, 2> out_size{h, w};
    if (!size.empty()) {
      out_size = {size[0], size[1]};
    } else if (!args.get_bool("keep_size")) {
      out_size = kernels::rotated_bounds(angle, h, w);
    }
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          kernels::allocate_uninitialized(
                              DType::kU8, Shape{out_size[0], out_size[1], in.shape()[2]}));
    kernels::warp_affine_u8(in.view(), out.view(),
                            kernels::rotation(angle, h, w, out_size[0], out_size[1]),
                            args.get_string("interp_type") == "linear",
                            static_cast<uint8_t>(args.get_int("fill_value")));
    outputs->push_back(std::move(out));
    return Status();
  }
};

}  // namespace

const OperatorSchema& rotate_schema() {
  static const OperatorSchema schema{
      "rotate",
      "rotates images counter-clockwise about their centre",
      {"images"},
      {"images"},
      {
          {"angle", ArgType::kFloat, std::nullopt, "degrees, counter-clockwise", true},
          {"keep_size", ArgType::kBool, false,
           "true: output the input's size; false: the bounding box of the rotated image"},
          {"size", ArgType::kIntList, std::vector<int64_t>{},
           "output [height, width] (overrides keep_size)"},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest or linear"},
          {"fill_value", ArgType::kInt, int64_t{0}, "value of the uncovered corners"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_rotate(OpArgs args) {
  constexpr std::string_view kOp = "operator rotate";
  KILN_RETURN_IF_ERROR(check_warp_args(kOp, args));
  return std::unique_ptr<Operator>(new Rotate(std::move(args)));
}

}  // namespace kiln::pipeline::detail
