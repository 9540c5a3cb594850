// SPDX-License-Identifier: Apache-2.0
// The int8 residual Add (Q(Relu?(Add(DQ, DQ)))), MaxPool (Q(MaxPool(DQ))), GlobalAveragePool(DQ)
// and squeeze-and-excitation scaling (Q(Mul(DQ, Sigmoid))) on the 8-bit values (kernels/int8.h):
// their patterns and lowerings.
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

std::optional<IntMean> int_mean(const Builder&, const Node& pool) {
  if (pool.kind() != OpKind::kGlobalAveragePool) return std::nullopt;
  IntMean m;
  m.pool = &pool;
  m.dq = pool.input(0)->producer();
  const Value* y = pool.output(0);
  // Other readers of the DequantizeLinear may read it in float: the pool still reads the 8-bit
  // values.
  if (m.dq == nullptr || m.dq->kind() != OpKind::kDequantizeLinear || !is_static4(m.dq->input(0)) ||
      m.dq->output(0)->tensor_type().dtype != DType::kF32 || !is_static4(y) ||
      y->tensor_type().dtype != DType::kF32) {
    return std::nullopt;
  }
  std::optional<QParams> p = qdq_params(*m.dq);
  if (!p) return std::nullopt;
  m.in = *p;
  return m;
}

std::optional<IntScale> int_channel_scale(const Builder& b, const Node& sigmoid) {
  if (sigmoid.kind() != OpKind::kSigmoid || sigmoid.num_inputs() != 1) return std::nullopt;
  IntScale r;
  r.sigmoid = &sigmoid;
  r.mul = sole_reader(b, sigmoid.output(0));
  if (r.mul == nullptr || r.mul->kind() != OpKind::kMul || r.mul->num_inputs() != 2 ||
      !is_static4(r.mul->output(0)) || r.mul->output(0)->tensor_type().dtype != DType::kF32) {
    return std::nullopt;
  }
  const Value* x = r.mul->input(r.mul->input(0) == sigmoid.output(0) ? 1 : 0);
  const Shape y = r.mul->output(0)->tensor_type().shape();
  const Value* s = sigmoid.input(0);
  if (x == sigmoid.output(0) || !is_static4(x) || x->tensor_type().shape() != y || !is_static4(s) ||
      s->tensor_type().shape() != Shape{y[0], y[1], 1, 1} ||
      s->tensor_type().dtype != DType::kF32 || y[2] * y[3] <= 1 || y[1] % 4 != 0) {
    return std::nullopt;
  }
  r.dq = x->producer();
  if (r.dq == nullptr || r.dq->kind() != OpKind::kDequantizeLinear) return std::nullopt;
  std::optional<QParams> in = qdq_params(*r.dq);
  if (!in || !centerable(*in)) return std::nullopt;
  r.q = sole_reader(b, r.mul->output(0));
  if (r.q == nullptr || r.q->kind() != OpKind::kQuantizeLinear) return std::nullopt;
  std::optional<QParams> out = qdq_params(*r.q);
  if (!out || !centerable(*out) || !is_static4(r.q->output(0))) return std::nullopt;
  r.in = *in;
  r.out = *out;
  return r;
}

// A DequantizeLinear whose step is its readers' (int8 Adds, MaxPools, GlobalAveragePools and
// channel scalings), none of them a graph output.
bool deferred_dq(const Builder& b, const Node& dq) {
  const Value* v = dq.output(0);
  if (v->uses().empty()) return false;
  for (const Value* out : b.graph().outputs()) {
    if (out == v) return false;
  }
  for (const Use& use : v->uses()) {
    const Node& reader = *use.node;
    bool int8 = false;
    switch (reader.kind()) {
      case OpKind::kAdd: int8 = int_add(b, reader).has_value(); break;
      case OpKind::kMaxPool: int8 = int_pool(b, reader).has_value(); break;
      case OpKind::kGlobalAveragePool: int8 = int_mean(b, reader).has_value(); break;
      case OpKind::kMul: {
        const Value* other = reader.input(reader.input(0) == v ? 1 : 0);
        const Node* sigmoid = other->producer();
        const std::optional<IntScale> r =
            sigmoid != nullptr ? int_channel_scale(b, *sigmoid) : std::nullopt;
        int8 = r && r->dq == &dq;
        break;
      }
      default: break;
    }
    if (!int8) return false;
  }
  return true;
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

bool lower_int_channel_scale(Builder& b, const IntScale& r) {
  const int xi = centered_input(b, r.dq->input(0), r.in);
  const int64_t stored_c = b.buffer(xi).shape[1];
  if (stored_c % 4 != 0 || !b.has_buffer(r.sigmoid->input(0))) return false;
  const Shape x = r.dq->input(0)->tensor_type().shape();
  const int gi = b.stored_buffer(r.sigmoid->input(0));  // [N, C, 1, 1]: alike in either layout
  const Value* y = r.q->output(0);
  const Out o = define_output(b, y, stored_c);
  ChannelScale8 p;
  p.n = x[0];
  p.c = x[1];
  p.stored_c = stored_c;
  p.s = x[2] * x[3];
  p.k = r.in.scale / r.out.scale;
  std::tie(p.lo, p.hi) = centered_bounds(r.out, false);
  const int yi = o.centered;
  add(b, *r.mul, "Sigmoid+ChannelScale int8", {xi, gi}, {yi}, [=](Session& s) mutable {
    p.x = ptr(s, xi);
    p.gate = static_cast<const float*>(ptr(s, gi));
    p.y = ptr(s, yi);
    return launch_channel_scale8(p, s.stream);
  });
  finish_output(b, o, y, r.out);
  b.mark_fused(r.mul);
  b.mark_fused(r.q);
  return true;
}

}  // namespace kiln::compiler::cuda
