// SPDX-License-Identifier: Apache-2.0
// The int8 residual Add (Q(Relu?(Add(DQ, DQ)))), MaxPool (Q(MaxPool(DQ))) and
// GlobalAveragePool(DQ) on the 8-bit values (kernels/int8.h): their patterns and lowerings.
#include <optional>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/quantized.h"

namespace kiln::compiler::cuda {

namespace {

bool same(const QParams& a, const QParams& b) {
  return a.scale == b.scale && a.zp == b.zp && a.type == b.type;
}

}  // namespace

std::optional<IntAdd> int_add(const Builder& b, const Node& add) {
  if (add.kind() != OpKind::kAdd || add.num_inputs() != 2) return std::nullopt;
  IntAdd a;
  a.add = &add;
  for (int i = 0; i < 2; ++i) {
    const Node* dq = add.input(i)->producer();
    if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear ||
        sole_reader(b, add.input(i)) != &add || !is_static4(dq->input(0))) {
      return std::nullopt;
    }
    std::optional<QParams> p = qdq_params(*dq);
    if (!p || !centerable(*p)) return std::nullopt;
    a.dq[i] = dq;
    a.in[i] = *p;
  }
  // Channels a multiple of 4: both operands then stored alike (no padding).
  const Shape shape = a.dq[0]->input(0)->tensor_type().shape();
  if (a.dq[0] == a.dq[1] || shape != a.dq[1]->input(0)->tensor_type().shape() ||
      shape[1] % 4 != 0) {
    return std::nullopt;
  }
  const Node* next = sole_reader(b, add.output(0));
  if (next != nullptr && next->kind() == OpKind::kRelu) {
    a.relu = next;
    next = sole_reader(b, next->output(0));
  }
  if (next == nullptr || next->kind() != OpKind::kQuantizeLinear) return std::nullopt;
  std::optional<QParams> p = qdq_params(*next);
  if (!p || !centerable(*p) || !is_static4(next->output(0))) return std::nullopt;
  a.q = next;
  a.out = *p;
  return a;
}

std::optional<IntPool> int_pool(const Builder& b, const Node& pool) {
  if (pool.kind() != OpKind::kMaxPool || pool.num_outputs() != 1) return std::nullopt;
  IntPool r;
  r.pool = &pool;
  r.dq = pool.input(0)->producer();
  if (r.dq == nullptr || r.dq->kind() != OpKind::kDequantizeLinear ||
      sole_reader(b, pool.input(0)) != &pool || !is_static4(r.dq->input(0))) {
    return std::nullopt;
  }
  r.q = sole_reader(b, pool.output(0));
  if (r.q == nullptr || r.q->kind() != OpKind::kQuantizeLinear || !is_static4(r.q->output(0))) {
    return std::nullopt;
  }
  std::optional<QParams> in = qdq_params(*r.dq);
  std::optional<QParams> out = qdq_params(*r.q);
  if (!in || !out || !same(*in, *out) || !centerable(*in)) return std::nullopt;
  const auto& op = pool.attrs<ops::MaxPool>();
  if (!op.kernel_shape || op.storage_order != 0) return std::nullopt;
  const Shape x = r.dq->input(0)->tensor_type().shape();
  const Shape y = r.q->output(0)->tensor_type().shape();
  const std::vector<int64_t> in_hw = {x[2], x[3]};
  Result<WindowGeometry> g = forward_window(
      in_hw, *op.kernel_shape, {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0});
  if (!g.ok() || g->rank() != 2 || g->out != std::vector<int64_t>{y[2], y[3]} ||
      g->dilations != std::vector<int64_t>{1, 1} || x[1] % 4 != 0) {
    return std::nullopt;
  }
  r.p.n = x[0];
  r.p.h = x[2];
  r.p.w = x[3];
  r.p.oh = y[2];
  r.p.ow = y[3];
  r.p.kh = static_cast<int>(g->kernel[0]);
  r.p.kw = static_cast<int>(g->kernel[1]);
  r.p.sh = static_cast<int>(g->strides[0]);
  r.p.sw = static_cast<int>(g->strides[1]);
  r.p.ph = static_cast<int>(g->pad_begin[0]);
  r.p.pw = static_cast<int>(g->pad_begin[1]);
  return r;
}

std::optional<IntMean> int_mean(const Builder& b, const Node& pool) {
  if (pool.kind() != OpKind::kGlobalAveragePool) return std::nullopt;
  IntMean m;
  m.pool = &pool;
  m.dq = pool.input(0)->producer();
  const Value* y = pool.output(0);
  if (m.dq == nullptr || m.dq->kind() != OpKind::kDequantizeLinear ||
      sole_reader(b, pool.input(0)) != &pool || !is_static4(m.dq->input(0)) ||
      m.dq->output(0)->tensor_type().dtype != DType::kF32 || !is_static4(y) ||
      y->tensor_type().dtype != DType::kF32) {
    return std::nullopt;
  }
  std::optional<QParams> p = qdq_params(*m.dq);
  if (!p) return std::nullopt;
  m.in = *p;
  return m;
}

// A DequantizeLinear whose step is its reader's (an int8 Add, MaxPool or GlobalAveragePool).
bool deferred_dq(const Builder& b, const Node& dq) {
  const Node* reader = sole_reader(b, dq.output(0));
  if (reader == nullptr) return false;
  if (reader->kind() == OpKind::kAdd) return int_add(b, *reader).has_value();
  if (reader->kind() == OpKind::kMaxPool) return int_pool(b, *reader).has_value();
  if (reader->kind() == OpKind::kGlobalAveragePool) return int_mean(b, *reader).has_value();
  return false;
}

// Both operands are stored alike: int_add checked the shapes and channels.
bool lower_int_add(Builder& b, const IntAdd& a) {
  const int ai = centered_input(b, a.dq[0]->input(0), a.in[0]);
  const int bi = centered_input(b, a.dq[1]->input(0), a.in[1]);
  const Value* y = a.q->output(0);
  const Out o = define_output(b, y, b.buffer(ai).shape[1]);
  Requant8 r;
  r.ka = a.in[0].scale / a.out.scale;
  r.kb = a.in[1].scale / a.out.scale;
  std::tie(r.lo, r.hi) = centered_bounds(a.out, a.relu != nullptr);
  const int64_t n = b.buffer(ai).shape.numel();
  const int yi = o.centered;
  add(b, *a.add, a.relu != nullptr ? "Add+Relu int8" : "Add int8", {ai, bi}, {yi},
      [=](Session& s) mutable {
        r.a = ptr(s, ai);
        r.b = ptr(s, bi);
        r.y = ptr(s, yi);
        return launch_requant8(r, n, s.stream);
      });
  finish_output(b, o, y, a.out);
  if (a.relu != nullptr) b.mark_fused(a.relu);
  b.mark_fused(a.q);
  return true;
}

bool lower_int_pool(Builder& b, IntPool r) {
  const QParams p = *qdq_params(*r.dq);
  const int xi = centered_input(b, r.dq->input(0), p);
  r.p.c = b.buffer(xi).shape[1];  // a multiple of 4 (int_pool)
  const Value* y = r.q->output(0);
  const Out o = define_output(b, y, r.p.c);
  const int yi = o.centered;
  const Pool8 geometry = r.p;
  add(b, *r.pool, "MaxPool int8", {xi}, {yi},
      [=](Session& s) { return launch_maxpool8(ptr(s, xi), ptr(s, yi), geometry, s.stream); });
  finish_output(b, o, y, p);
  b.mark_fused(r.q);
  return true;
}

bool lower_int_mean(Builder& b, const IntMean& m) {
  const int xi = centered_input(b, m.dq->input(0), m.in);
  const Shape x = m.dq->input(0)->tensor_type().shape();
  const int64_t stored_c = b.buffer(xi).shape[1];
  const int yi = b.define(m.pool->output(0));
  const float scale = m.in.scale;
  const int64_t n = x[0], c = x[1], s = x[2] * x[3];
  add(b, *m.pool, "DequantizeLinear+GlobalAveragePool int8", {xi}, {yi}, [=](Session& ss) {
    return launch_mean8(ptr(ss, xi), n, c, stored_c, s, scale, static_cast<float*>(ptr(ss, yi)),
                        ss.stream);
  });
  return true;
}

}  // namespace kiln::compiler::cuda
