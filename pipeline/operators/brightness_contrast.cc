// SPDX-License-Identifier: Apache-2.0
// brightness_contrast: DALI's per-sample brightness and contrast on uint8 images of any channels.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class BrightnessContrast final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("brightness_contrast", in, true));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::apply_lut_u8(in.view(), out.view(), lut(args));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("brightness_contrast", shape, dtype));
    return lut_plan(shape, lut(args));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.apply_lut(images, steps);
  }

 private:
  static kernels::Lut lut(const OpArgs& args) {
    return kernels::brightness_contrast_lut(
        args.get_float("brightness"), args.get_float("brightness_shift"),
        args.get_float("contrast"), args.get_float("contrast_center"));
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
