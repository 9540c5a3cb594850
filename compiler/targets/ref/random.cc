// SPDX-License-Identifier: Apache-2.0
// ref kernels for the random op family: plain loops, the executable specification.
#include "compiler/ops/random.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <optional>
#include <random>
#include <vector>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// The generator a node draws from: a fresh one seeded from the node's `seed` attribute (so the
// node is deterministic), else the interpreter's per-run generator.
class NodeRng {
 public:
  NodeRng(const std::optional<float>& seed, KernelContext& ctx)
      : own_(seed ? std::bit_cast<uint32_t>(*seed) : 0), gen_(seed ? own_ : ctx.rng()) {}
  NodeRng(const NodeRng&) = delete;
  NodeRng& operator=(const NodeRng&) = delete;

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  double normal() {
    double u1 = 1.0 - uniform();  // (0, 1]
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 own_;
  std::mt19937_64& gen_;
};

template <class F>
Status fill_random(KernelContext& ctx, F&& draw) {
  Tensor& out = ctx.output(0);
  std::vector<double> values(static_cast<size_t>(out.numel()));
  for (double& v : values) v = draw();
  store_doubles(values, out);
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::Bernoulli& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  const std::vector<double> p = tensor_to_doubles(ctx.input(0));
  size_t i = 0;
  return fill_random(ctx, [&] { return rng.uniform() < p[i++] ? 1.0 : 0.0; });
}

template <>
Status run_op(const ops::RandomUniform& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  return fill_random(ctx, [&] { return op.low + (op.high - op.low) * rng.uniform(); });
}

template <>
Status run_op(const ops::RandomUniformLike& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  return fill_random(ctx, [&] { return op.low + (op.high - op.low) * rng.uniform(); });
}

template <>
Status run_op(const ops::RandomNormal& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  return fill_random(ctx, [&] { return op.mean + op.scale * rng.normal(); });
}

template <>
Status run_op(const ops::RandomNormalLike& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  return fill_random(ctx, [&] { return op.mean + op.scale * rng.normal(); });
}

template <>
Status run_op(const ops::Multinomial& op, KernelContext& ctx) {
  NodeRng rng(op.seed, ctx);
  const Tensor& x = ctx.input(0);
  const int64_t batch = x.shape()[0];
  const int64_t classes = x.shape()[1];
  const std::vector<double> logits = tensor_to_doubles(x);
  std::vector<double> samples(static_cast<size_t>(batch * op.sample_size));
  std::vector<double> cumulative(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    const double* row = &logits[static_cast<size_t>(b * classes)];
    const double top = *std::max_element(row, row + classes);
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      total += std::exp(row[c] - top);
      cumulative[static_cast<size_t>(c)] = total;
    }
    for (int64_t s = 0; s < op.sample_size; ++s) {
      const double u = rng.uniform() * total;
      auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
      int64_t c = std::min<int64_t>(it - cumulative.begin(), classes - 1);
      samples[static_cast<size_t>(b * op.sample_size + s)] = static_cast<double>(c);
    }
  }
  store_doubles(samples, ctx.output(0));
  return Status();
}

}  // namespace kiln::compiler::ref
