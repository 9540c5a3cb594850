// SPDX-License-Identifier: Apache-2.0
// hsv: DALI's hue rotation, saturation and value scaling of RGB images (a YIQ-space matrix).
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {

namespace {

class Hsv final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_rgb("hsv", in));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::color_matrix_u8(in.view(), out.view(), matrix(args));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_rgb("hsv", shape, dtype));
    return matrix_plan(shape, matrix(args));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.color_matrix(images, steps);
  }

 private:
  static kernels::ColorMatrix matrix(const OpArgs& args) {
    return kernels::hsv_matrix(args.get_float("hue"), args.get_float("saturation"),
                               args.get_float("value"));
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
