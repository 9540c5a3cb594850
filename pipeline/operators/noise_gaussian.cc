// SPDX-License-Identifier: Apache-2.0
// noise.gaussian: adds seeded normal noise to every element of uint8 images.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/filter.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class NoiseGaussian final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("noise.gaussian", in, true));
    const double stddev = args.get_float("stddev");
    if (!(stddev >= 0.0)) {
      return invalid_argument_error(
          fmt::format("operator noise.gaussian: stddev must be >= 0, got {}", stddev));
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
    kernels::gaussian_noise_u8(in.view(), out.view(), args.get_float("mean"), stddev, ctx.seed);
    outputs->push_back(std::move(out));
    return Status();
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
