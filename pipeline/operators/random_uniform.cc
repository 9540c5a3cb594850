// SPDX-License-Identifier: Apache-2.0
// random.uniform: one float32 per sample, uniform in [lo, hi), for per-sample arguments.
#include <fmt/format.h>

#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class RandomUniform final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor>,
             std::vector<Tensor>* outputs) const override {
    const auto& range = args.get_floats("range");
    SampleRng rng(ctx.seed);
    outputs->push_back(Tensor::scalar(static_cast<float>(rng.uniform(range[0], range[1]))));
    return Status();
  }
};

}  // namespace

const OperatorSchema& random_uniform_schema() {
  static const OperatorSchema schema{
      "random.uniform",
      "draws one float per sample, uniform in [lo, hi)",
      {},
      {"value"},
      {{"range", ArgType::kFloatList, std::vector<double>{0.0, 1.0}, "[lo, hi)"}}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_random_uniform(OpArgs args) {
  const auto& range = args.get_floats("range");
  if (range.size() != 2 || !(range[0] <= range[1])) {
    return invalid_argument_error(
        fmt::format("operator random.uniform: range must be [lo, hi] with lo <= hi, got [{}]",
                    fmt::join(range, ",")));
  }
  return std::unique_ptr<Operator>(new RandomUniform(std::move(args)));
}

}  // namespace kiln::pipeline::detail
