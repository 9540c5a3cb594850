// SPDX-License-Identifier: Apache-2.0
// color_twist: hue, saturation, brightness and contrast of RGB images in one matrix pass.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class ColorTwist final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_rgb("color_twist", in));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::color_matrix_u8(in.view(), out.view(), matrix(args));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_rgb("color_twist", shape, dtype));
    return matrix_plan(shape, matrix(args));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.color_matrix(images, steps);
  }

 private:
  static kernels::ColorMatrix matrix(const OpArgs& args) {
    return kernels::then_brightness_contrast(
        kernels::hsv_matrix(args.get_float("hue"), args.get_float("saturation"), 1.0),
        args.get_float("brightness"), 0.0, args.get_float("contrast"),
        args.get_float("contrast_center"));
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
