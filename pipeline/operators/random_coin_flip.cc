// SPDX-License-Identifier: Apache-2.0
// random.coin_flip: one int32 per sample, 1 with the given probability, else 0.
#include <fmt/format.h>

#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class RandomCoinFlip final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor>,
             std::vector<Tensor>* outputs) const override {
    SampleRng rng(ctx.seed);
    const bool heads = rng.uniform(0.0, 1.0) < args.get_float("probability");
    outputs->push_back(Tensor::scalar(static_cast<int32_t>(heads)));
    return Status();
  }
};

}  // namespace

const OperatorSchema& random_coin_flip_schema() {
  static const OperatorSchema schema{
      "random.coin_flip",
      "draws one int per sample: 1 with the given probability, else 0",
      {},
      {"value"},
      {{"probability", ArgType::kFloat, 0.5, "chance of 1, in [0, 1]"}}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_random_coin_flip(OpArgs args) {
  double p = args.get_float("probability");
  if (!(p >= 0.0 && p <= 1.0)) {
    return invalid_argument_error(
        fmt::format("operator random.coin_flip: probability {} must be in [0, 1]", p));
  }
  return std::unique_ptr<Operator>(new RandomCoinFlip(std::move(args)));
}

}  // namespace kiln::pipeline::detail
