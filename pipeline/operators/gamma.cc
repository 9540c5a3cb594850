// SPDX-License-Identifier: Apache-2.0
// gamma: out = 255 * (in / 255) ^ gamma on uint8 images of any channels (rocAL's gamma).
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Gamma final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("gamma", in, true));
    const double gamma = args.get_float("gamma");
    if (!(gamma > 0.0)) {
      return invalid_argument_error(
          fmt::format("operator gamma: gamma must be > 0, got {}", gamma));
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::apply_lut_u8(in.view(), out.view(), kernels::gamma_lut(gamma));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("gamma", shape, dtype));
    const double gamma = args.get_float("gamma");
    if (!(gamma > 0.0)) {
      return invalid_argument_error(
          fmt::format("operator gamma: gamma must be > 0, got {}", gamma));
    }
    return lut_plan(shape, kernels::gamma_lut(gamma));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.apply_lut(images, steps);
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
