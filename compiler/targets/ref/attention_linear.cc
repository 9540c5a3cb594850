// SPDX-License-Identifier: Apache-2.0
// ref kernel for the attention family's LinearAttention: the recurrence run token by token.
#include <cmath>

#include "compiler/ops/attention.h"
#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/attention_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::LinearAttention& op, KernelContext& ctx) {
  const Shape& qs = ctx.input(0).shape();
  const int64_t batch = qs[0], len = qs[1];
  const int64_t hq = *op.q_num_heads, hkv = *op.kv_num_heads;
  const int64_t dk = qs[2] / hq;
  const int64_t dv = ctx.input(2).shape()[2] / hkv;
  const int64_t groups = hq / hkv;
  const bool gated = op.update_rule == "gated" || op.update_rule == "gated_delta";
  const bool delta = op.update_rule == "delta" || op.update_rule == "gated_delta";
  const double scale =
      op.scale != 0.0f ? static_cast<double>(op.scale) : 1.0 / std::sqrt(static_cast<double>(dk));

  // Packed [batch, len, heads * size] inputs, read in place.
  const std::vector<double> q = tensor_to_doubles(ctx.input(0));
  const std::vector<double> k = tensor_to_doubles(ctx.input(1));
  const std::vector<double> v = tensor_to_doubles(ctx.input(2));
  const std::vector<double> decay = gated ? tensor_to_doubles(ctx.input(4)) : std::vector<double>();
  const std::vector<double> beta = delta ? tensor_to_doubles(ctx.input(5)) : std::vector<double>();
  // Per-key-dim decay holds hkv * dk values a token, per-head decay hkv; beta hkv or 1.
  const int64_t decay_width = gated ? ctx.input(4).shape()[2] : 0;
  const int64_t beta_width = delta ? ctx.input(5).shape()[2] : 0;

  // The state [batch, hkv, dk, dv].
  std::vector<double> state = ctx.has_input(3)
                                  ? tensor_to_doubles(ctx.input(3))
                                  : std::vector<double>(static_cast<size_t>(batch * hkv * dk * dv));
  std::vector<double> out(static_cast<size_t>(batch * len * hq * dv));
  std::vector<double> update(static_cast<size_t>(dv));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < len; ++t) {
      const int64_t token = b * len + t;
      for (int64_t h = 0; h < hkv; ++h) {
        double* s = &state[static_cast<size_t>((b * hkv + h) * dk * dv)];
        const double* kt = &k[static_cast<size_t>((token * hkv + h) * dk)];
        const double* vt = &v[static_cast<size_t>((token * hkv + h) * dv)];
        if (gated) {
          for (int64_t i = 0; i < dk; ++i) {
            const int64_t g = decay_width == hkv ? h : h * dk + i;
            const double factor = std::exp(decay[static_cast<size_t>(token * decay_width + g)]);
            for (int64_t m = 0; m < dv; ++m) s[i * dv + m] *= factor;
          }
        }
        for (int64_t m = 0; m < dv; ++m) update[static_cast<size_t>(m)] = vt[m];
        if (delta) {
          // v <- beta * (v - S^T k): only what the state does not already recall is written.
          const double rate =
              beta[static_cast<size_t>(token * beta_width + (beta_width == 1 ? 0 : h))];
          for (int64_t m = 0; m < dv; ++m) {
            double recalled = 0;
            for (int64_t i = 0; i < dk; ++i) recalled += s[i * dv + m] * kt[i];
            update[static_cast<size_t>(m)] = rate * (vt[m] - recalled);
          }
        }
        for (int64_t i = 0; i < dk; ++i) {
          for (int64_t m = 0; m < dv; ++m) s[i * dv + m] += kt[i] * update[static_cast<size_t>(m)];
        }
      }
      // Each query head reads its key/value head's updated state.
      for (int64_t h = 0; h < hq; ++h) {
        const double* s = &state[static_cast<size_t>((b * hkv + h / groups) * dk * dv)];
        const double* qt = &q[static_cast<size_t>((token * hq + h) * dk)];
        for (int64_t m = 0; m < dv; ++m) {
          double sum = 0;
          for (int64_t i = 0; i < dk; ++i) sum += qt[i] * s[i * dv + m];
          out[static_cast<size_t>((token * hq + h) * dv + m)] = scale * sum;
        }
      }
    }
  }
  store_doubles(out, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.output_used(1)) store_doubles(state, ctx.output(1));
  return Status();
}

}  // namespace kiln::compiler::ref
