// SPDX-License-Identifier: Apache-2.0
// crop: a fixed-size window of each HWC image at a (per-sample) relative position.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/operators/crop_window.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Crop final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("crop", in, false));
    const auto& crop = args.get_ints("crop");
    KILN_ASSIGN_OR_RETURN(
        kernels::Window window,
        anchored_window("crop", in.shape()[0], in.shape()[1], crop[0], crop[1],
                        args.get_float("crop_pos_x"), args.get_float("crop_pos_y")));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(
                                          in.dtype(), Shape{crop[0], crop[1], in.shape()[2]}));
    kernels::crop_hwc(in.view(), out.view(), window);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("crop", shape, dtype));
    const auto& crop = args.get_ints("crop");
    KILN_ASSIGN_OR_RETURN(
        kernels::Window window,
        anchored_window("crop", shape[0], shape[1], crop[0], crop[1], args.get_float("crop_pos_x"),
                        args.get_float("crop_pos_y")));
    return GpuSamplePlan{{window, crop[0], crop[1]}, Shape{crop[0], crop[1], shape[2]}, dtype};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.crop_flip(images, steps);
  }
};

}  // namespace

const OperatorSchema& crop_schema() {
  static const OperatorSchema schema{
      "crop",
      "cuts a fixed-size window out of each HWC image",
      {"images"},
      {"images"},
      {
          {"crop", ArgType::kIntList, std::nullopt, "window size [height, width]"},
          {"crop_pos_x", ArgType::kFloat, 0.5, "horizontal position in [0, 1] (0.5: centre)", true},
          {"crop_pos_y", ArgType::kFloat, 0.5, "vertical position in [0, 1] (0.5: centre)", true},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_crop(OpArgs args) {
  const auto& crop = args.get_ints("crop");
  if (crop.size() != 2 || crop[0] <= 0 || crop[1] <= 0) {
    return invalid_argument_error(fmt::format(
        "operator crop: crop must be [height, width] > 0, got [{}]", fmt::join(crop, ",")));
  }
  return std::unique_ptr<Operator>(new Crop(std::move(args)));
}

}  // namespace kiln::pipeline::detail
