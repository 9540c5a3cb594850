// SPDX-License-Identifier: Apache-2.0
// gaussian_blur: separable gaussian low-pass of uint8 images, per-sample sigma.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/filter.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

// The sample's taps (its sigma may be per-sample).
Result<std::vector<float>> blur_taps(const OpArgs& args) {
  const double sigma = args.get_float("sigma");
  if (!(sigma > 0.0) || sigma > 100.0) {
    return invalid_argument_error(
        fmt::format("operator gaussian_blur: sigma must be in (0, 100], got {}", sigma));
  }
  return kernels::gaussian_taps(sigma, args.get_int("window_size"));
}

class GaussianBlur final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("gaussian_blur", in, true));
    KILN_ASSIGN_OR_RETURN(std::vector<float> taps, blur_taps(args));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::convolve_separable_u8(in.view(), out.view(), taps, taps);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("gaussian_blur", shape, dtype));
    GpuSamplePlan plan = same_size_plan(shape, DType::kU8);
    KILN_ASSIGN_OR_RETURN(plan.step.taps, blur_taps(args));
    return plan;
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.blur(images, steps);
  }
};

}  // namespace

const OperatorSchema& gaussian_blur_schema() {
  static const OperatorSchema schema{
      "gaussian_blur",
      "blurs with a gaussian of the given sigma (borders mirrored, reflect-101)",
      {"images"},
      {"images"},
      {
          {"sigma", ArgType::kFloat, 1.0, "standard deviation in pixels, in (0, 100]", true},
          {"window_size", ArgType::kInt, int64_t{0},
           "odd number of taps per axis (0: 2 * ceil(3 sigma) + 1)"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_gaussian_blur(OpArgs args) {
  const int64_t window = args.get_int("window_size");
  if (window < 0 || (window > 0 && window % 2 == 0) || window > 601) {
    return invalid_argument_error(fmt::format(
        "operator gaussian_blur: window_size must be 0 or odd and at most 601, got {}", window));
  }
  return std::unique_ptr<Operator>(new GaussianBlur(std::move(args)));
}

}  // namespace kiln::pipeline::detail
