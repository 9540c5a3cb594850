// SPDX-License-Identifier: Apache-2.0
// resize: HWC uint8 images to a fixed size, a fixed shorter side, or one side keeping the aspect.
#include "pipeline/kernels/resize.h"

#include <fmt/format.h>

#include <cmath>

#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Resize final : public Operator {
 public:
  Resize(OpArgs args, kernels::Interp interp) : Operator(std::move(args)), interp_(interp) {}

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("resize", in, true));
    const double h = static_cast<double>(in.shape()[0]), w = static_cast<double>(in.shape()[1]);
    int64_t out_w = args.get_int("resize_x"), out_h = args.get_int("resize_y");
    const int64_t shorter = args.get_int("resize_shorter");
    if (shorter > 0) {
      double scale = static_cast<double>(shorter) / std::min(h, w);
      out_h = h <= w ? shorter : std::llround(h * scale);
      out_w = h <= w ? std::llround(w * scale) : shorter;
    } else if (out_w <= 0) {
      out_w = std::llround(w * static_cast<double>(out_h) / h);
    } else if (out_h <= 0) {
      out_h = std::llround(h * static_cast<double>(out_w) / w);
    }
    out_w = std::max<int64_t>(out_w, 1);
    out_h = std::max<int64_t>(out_h, 1);
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::allocate(DType::kU8, Shape{out_h, out_w, in.shape()[2]}));
    kernels::resize_u8(in.view(), out.view(), interp_);
    outputs->push_back(std::move(out));
    return Status();
  }

 private:
  kernels::Interp interp_;
};

}  // namespace

const OperatorSchema& resize_schema() {
  static const OperatorSchema schema{
      "resize",
      "resizes HWC uint8 images",
      {"images"},
      {"images"},
      {
          {"resize_x", ArgType::kInt, int64_t{0}, "output width (0: keep the aspect ratio)", true},
          {"resize_y", ArgType::kInt, int64_t{0}, "output height (0: keep the aspect ratio)", true},
          {"resize_shorter", ArgType::kInt, int64_t{0},
           "output size of the shorter side, keeping the aspect ratio (overrides resize_x/y)"},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest or linear"},
          {"antialias", ArgType::kBool, true,
           "low-pass filter when downscaling with linear interpolation (as PIL)"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_resize(OpArgs args) {
  const std::string& interp = args.get_string("interp_type");
  kernels::Interp mode;
  if (interp == "nearest") {
    mode = kernels::Interp::kNearest;
  } else if (interp == "linear") {
    mode = args.get_bool("antialias") ? kernels::Interp::kAntialiased : kernels::Interp::kLinear;
  } else {
    return invalid_argument_error(
        fmt::format("operator resize: interp_type \"{}\": expected nearest or linear", interp));
  }
  if (args.get_int("resize_shorter") <= 0 && args.get_int("resize_x") <= 0 &&
      args.get_int("resize_y") <= 0) {
    return invalid_argument_error(
        "operator resize: set resize_x, resize_y or resize_shorter to a positive size");
  }
  return std::unique_ptr<Operator>(new Resize(std::move(args), mode));
}

}  // namespace kiln::pipeline::detail
