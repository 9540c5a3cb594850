// SPDX-License-Identifier: Apache-2.0
// resize: HWC uint8 images to a fixed size, a fixed shorter side, or one side keeping the aspect.
#include "pipeline/kernels/resize.h"

#include <fmt/format.h>

#include <cmath>

#include "pipeline/kernels/buffer.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

// The output [height, width] for an input of h x w pixels.
std::pair<int64_t, int64_t> output_size(const OpArgs& args, int64_t in_h, int64_t in_w) {
  const double h = static_cast<double>(in_h), w = static_cast<double>(in_w);
  int64_t out_w = args.get_int("resize_x"), out_h = args.get_int("resize_y");
  const int64_t shorter = args.get_int("resize_shorter");
  const int64_t longer = args.get_int("resize_longer");
  const int64_t max_size = args.get_int("max_size");
  if (shorter > 0 || longer > 0) {
    double scale = shorter > 0 ? static_cast<double>(shorter) / std::min(h, w)
                               : static_cast<double>(longer) / std::max(h, w);
    if (max_size > 0 && std::max(h, w) * scale > static_cast<double>(max_size)) {
      scale = static_cast<double>(max_size) / std::max(h, w);
    }
    out_h = std::llround(h * scale);
    out_w = std::llround(w * scale);
    if (shorter > 0 && scale == static_cast<double>(shorter) / std::min(h, w)) {
      (h <= w ? out_h : out_w) = shorter;  // exact, whatever the rounding of the other side
    }
  } else if (out_w <= 0) {
    out_w = std::llround(w * static_cast<double>(out_h) / h);
  } else if (out_h <= 0) {
    out_h = std::llround(h * static_cast<double>(out_w) / w);
  }
  if (max_size > 0) {
    out_w = std::min(out_w, max_size);
    out_h = std::min(out_h, max_size);
  }
  out_w = std::max<int64_t>(out_w, 1);
  out_h = std::max<int64_t>(out_h, 1);
  return {out_h, out_w};
}

class Resize final : public Operator {
 public:
  Resize(OpArgs args, kernels::Interp interp) : Operator(std::move(args)), interp_(interp) {}

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("resize", in, true));
    const auto [out_h, out_w] = output_size(args, in.shape()[0], in.shape()[1]);
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(
                                          DType::kU8, Shape{out_h, out_w, in.shape()[2]}));
    kernels::resize_u8(in.view(), out.view(), interp_);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("resize", shape, dtype));
    const auto [out_h, out_w] = output_size(args, shape[0], shape[1]);
    return GpuSamplePlan{{kernels::Window{0, 0, shape[0], shape[1]}, out_h, out_w},
                         Shape{out_h, out_w, shape[2]},
                         DType::kU8};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.resize(images, steps, interp_);
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
          {"resize_longer", ArgType::kInt, int64_t{0},
           "output size of the longer side, keeping the aspect ratio (overrides resize_x/y)"},
          {"max_size", ArgType::kInt, int64_t{0},
           "upper bound of either output side (0: none); resize_shorter yields to it"},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest, linear or cubic"},
          {"antialias", ArgType::kBool, true,
           "low-pass filter when downscaling with linear or cubic interpolation (as PIL)"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_resize(OpArgs args) {
  KILN_ASSIGN_OR_RETURN(
      kernels::Interp mode,
      parse_interp("operator resize", args.get_string("interp_type"), args.get_bool("antialias")));
  if (args.get_int("resize_shorter") <= 0 && args.get_int("resize_longer") <= 0 &&
      args.get_int("resize_x") <= 0 && args.get_int("resize_y") <= 0) {
    return invalid_argument_error(
        "operator resize: set resize_x, resize_y, resize_shorter or resize_longer to a positive "
        "size");
  }
  return std::unique_ptr<Operator>(new Resize(std::move(args), mode));
}

}  // namespace kiln::pipeline::detail
