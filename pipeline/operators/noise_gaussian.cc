// SPDX-License-Identifier: Apache-2.0
// noise.gaussian: adds seeded normal noise to every element of uint8 images.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/filter.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

Status check_stddev(const OpArgs& args) {
  const double stddev = args.get_float("stddev");
  if (!(stddev >= 0.0)) {
    return invalid_argument_error(
        fmt::format("operator noise.gaussian: stddev must be >= 0, got {}", stddev));
  }
  return Status();
}

class NoiseGaussian final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("noise.gaussian", in, true));
    KILN_RETURN_IF_ERROR(check_stddev(args));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::gaussian_noise_u8(in.view(), out.view(), args.get_float("mean"),
                               args.get_float("stddev"), ctx.seed);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("noise.gaussian", shape, dtype));
    KILN_RETURN_IF_ERROR(check_stddev(args));
    GpuSamplePlan plan = same_size_plan(shape, DType::kU8);
    plan.step.seed = ctx.seed;
    plan.step.noise_a = args.get_float("mean");
    plan.step.noise_b = args.get_float("stddev");
    return plan;
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.gaussian_noise(images, steps);
  }
};

}  // namespace

const OperatorSchema& noise_gaussian_schema() {
  static const OperatorSchema schema{
      "noise.gaussian",
      "adds normal noise N(mean, stddev) to every element, saturating",
      {"images"},
      {"images"},
      {
          {"mean", ArgType::kFloat, 0.0, "mean of the noise", true},
          {"stddev", ArgType::kFloat, 1.0, "standard deviation of the noise, >= 0", true},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_noise_gaussian(OpArgs args) {
  return std::unique_ptr<Operator>(new NoiseGaussian(std::move(args)));
}

}  // namespace kiln::pipeline::detail
