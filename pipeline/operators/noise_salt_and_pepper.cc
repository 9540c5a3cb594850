// SPDX-License-Identifier: Apache-2.0
// noise.salt_and_pepper: turns a seeded random fraction of pixels white (salt) or black (pepper).
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/filter.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

Status check_probabilities(const OpArgs& args) {
  const double prob = args.get_float("prob"), salt = args.get_float("salt_vs_pepper");
  if (!(prob >= 0.0 && prob <= 1.0 && salt >= 0.0 && salt <= 1.0)) {
    return invalid_argument_error(fmt::format(
        "operator noise.salt_and_pepper: prob {} and salt_vs_pepper {} must be in [0, 1]", prob,
        salt));
  }
  return Status();
}

class NoiseSaltAndPepper final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("noise.salt_and_pepper", in, true));
    KILN_RETURN_IF_ERROR(check_probabilities(args));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::salt_and_pepper_u8(in.view(), out.view(), args.get_float("prob"),
                                args.get_float("salt_vs_pepper"), args.get_bool("per_channel"),
                                ctx.seed);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("noise.salt_and_pepper", shape, dtype));
    KILN_RETURN_IF_ERROR(check_probabilities(args));
    GpuSamplePlan plan = same_size_plan(shape, DType::kU8);
    plan.step.seed = ctx.seed;
    plan.step.noise_a = args.get_float("prob");
    plan.step.noise_b = args.get_float("salt_vs_pepper");
    plan.step.per_channel = args.get_bool("per_channel");
    return plan;
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.salt_and_pepper(images, steps);
  }
};

}  // namespace

const OperatorSchema& noise_salt_and_pepper_schema() {
  static const OperatorSchema schema{
      "noise.salt_and_pepper",
      "replaces a random fraction of pixels with 255 (salt) or 0 (pepper)",
      {"images"},
      {"images"},
      {
          {"prob", ArgType::kFloat, 0.05, "chance that a pixel is replaced, in [0, 1]", true},
          {"salt_vs_pepper", ArgType::kFloat, 0.5, "chance that a replacement is salt", true},
          {"per_channel", ArgType::kBool, false, "draw each channel on its own"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_noise_salt_and_pepper(OpArgs args) {
  return std::unique_ptr<Operator>(new NoiseSaltAndPepper(std::move(args)));
}

}  // namespace kiln::pipeline::detail
