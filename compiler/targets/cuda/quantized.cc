// SPDX-License-Identifier: Apache-2.0
// The cuda target's int8 path: what qdq_fusion leaves of a QDQ model (QLinearConv, the residual
// Add and MaxPool between DequantizeLinear and QuantizeLinear, Q/DQ at the edges) runs on int8
// tensor cores with activations kept 8-bit between the convolutions.
//
// Activations between the int8 kernels are "centered": s8 values q - zero_point, NHWC (Buffer::
// centered), so that zero is 0 and convolution padding needs no zero-point correction. A u8
// tensor (PyTorch's activations: u8 with 0..127 from reduce_range observers) is exact in s8 where
// q - zero_point fits; values beyond saturate at 127. A reader that is not an int8 kernel gets
// the ONNX values (a step converts back), so centering never leaks.
//
// QLinearConv is one cuDNN graph (backend API): conv (s8 x s8, s32) -> x per-channel scale ->
// + bias -> [+ residual x scale] -> clamp -> s8, the engine timed among cuDNN's heuristic
// candidates. A residual Add (Q(Relu(Add(DQ(conv), DQ(z))))) whose other operand is computed
// fuses into the convolution that is lowered second, so ResNet's block end is one kernel.
//
// This file holds the quantization parameters, the centered buffers and lower_quantized, which
// tries the lowerings of lower_qdq.cc, lower_qlinear_conv.cc and lower_int8_add_pool.cc (the
// squeeze-and-excitation scaling at its Sigmoid).
#include "compiler/targets/cuda/quantized.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"

namespace kiln::compiler::cuda {

bool is_8bit(DType d) {
  return d == DType::kU8 || d == DType::kI8;
}

int32_t qmin(DType t) {
  return t == DType::kU8 ? 0 : -128;
}
int32_t qmax(DType t) {
  return t == DType::kU8 ? 255 : 127;
}

bool is_static4(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static() &&
         v->tensor_type().shape().rank() == 4;
}

std::optional<QParams> qparams(const Node& node, int scale_input, int zp_input, const Value* q) {
  if (q == nullptr || !q->type().is_tensor() || !is_8bit(q->tensor_type().dtype)) {
    return std::nullopt;
  }
  const Tensor* s =
      node.has_input(scale_input) ? node.input(scale_input)->constant_value() : nullptr;
  if (s == nullptr || s->dtype() != DType::kF32 || s->numel() != 1) return std::nullopt;
  QParams p;
  p.scale = s->data<float>()[0];
  p.type = q->tensor_type().dtype;
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) return std::nullopt;
  if (node.has_input(zp_input)) {
    const Tensor* z = node.input(zp_input)->constant_value();
    if (z == nullptr || z->numel() != 1 || z->dtype() != p.type) return std::nullopt;
    p.zp = p.type == DType::kU8 ? z->data<uint8_t>()[0] : z->data<int8_t>()[0];
  }
  return p;
}

// Q/DQ parameters of a QuantizeLinear (its output) or DequantizeLinear (its input).
std::optional<QParams> qdq_params(const Node& node) {
  const bool q = node.kind() == OpKind::kQuantizeLinear;
  if (!q && node.kind() != OpKind::kDequantizeLinear) return std::nullopt;
  return qparams(node, 1, 2, q ? node.output(0) : node.input(0));
}

// The clamp of a centered value quantized with `p` (after a ReLU when `relu`).
std::pair<int32_t, int32_t> centered_bounds(const QParams& p, bool relu) {
  int32_t lo = std::max(qmin(p.type) - p.zp, -128);
  const int32_t hi = std::min(qmax(p.type) - p.zp, 127);
  if (relu) lo = std::max(lo, 0);
  return {lo, hi};
}

// Whether every value quantized with `p` fits the centered s8 form (`q - zero_point` in
// [-128, 127]): int8 always with zero point 0, uint8 only with zero point 128. Others (uint8 with
// zero point 0, kiln's own calibration's after a ReLU) would saturate at half their range, so
// their nodes take the float path.
bool centerable(const QParams& p) {
  return qmin(p.type) - p.zp >= -128 && qmax(p.type) - p.zp <= 127;
}

const Node* sole_reader(const Builder& b, const Value* v) {
  return v == nullptr ? nullptr : b.only_consumer(v);
}

// Whether every reader of the 8-bit value `v` is an int8 kernel here (so it may stay centered):
// a QLinearConv reading it as its input, or a per-tensor DequantizeLinear.
bool centered_readers(const Builder& b, const Value* v) {
  for (const Value* out : b.graph().outputs()) {
    if (out == v) return false;
  }
  if (v->uses().empty()) return false;
  for (const auto& use : v->uses()) {
    const Node* n = use.node;
    if (n->kind() == OpKind::kQLinearConv && use.index == 0) {
      const std::optional<IntConv> c = int_conv(*n);
      if (c && centerable(c->x)) continue;
    }
    if (n->kind() == OpKind::kDequantizeLinear && use.index == 0 && qdq_params(*n)) continue;
    return false;
  }
  return true;
}

// A new centered s8 buffer (NHWC with `stored_c` channels when 4-D), `v`'s when not null.
int new_centered(Builder& b, const Value* v, const Shape& logical, int64_t stored_c) {
  Buffer buf;
  buf.dtype = DType::kI8;
  buf.shape = logical;
  if (logical.rank() == 4) {
    buf.shape = Shape{logical[0], stored_c, logical[2], logical[3]};
    buf.nhwc = true;
  }
  buf.centered = true;
  buf.bytes = static_cast<size_t>(buf.shape.numel());
  return b.define_buffer(v, std::move(buf));
}

// `v` (8-bit, parameters `p`) as a centered buffer: its own when it is one, else a converted copy
// (NHWC when 4-D).
int centered_input(Builder& b, const Value* v, const QParams& p) {
  const int id = b.stored_buffer(v);
  if (b.buffer(id).centered) return id;
  const Shape shape = v->tensor_type().shape();
  const int from = shape.rank() == 4 ? b.buffer_nhwc(v) : b.buffer_of(v);
  const int to = new_centered(b, nullptr, shape, shape.rank() == 4 ? shape[1] : 0);
  Requant8 r;
  r.a_u8 = p.type == DType::kU8;
  r.a_off = p.zp;
  const int64_t n = shape.numel();
  add(b, b.current(), "Center int8", {from}, {to}, [=](Session& s) mutable {
    r.a = ptr(s, from);
    r.y = ptr(s, to);
    return launch_requant8(r, n, s.stream);
  });
  return to;
}

Out define_output(Builder& b, const Value* v, int64_t stored_c) {
  const Shape shape = v->tensor_type().shape();
  Out o;
  // Only whole groups of 4 channels stay centered: the int8 convolutions reading it take no other.
  if (stored_c % 4 == 0 && centered_readers(b, v)) {
    o.centered = new_centered(b, v, shape, stored_c);
    return o;
  }
  o.centered = new_centered(b, nullptr, shape, shape.rank() == 4 ? shape[1] : 0);
  o.raw = b.define(v, shape.rank() == 4);
  return o;
}

void finish_output(Builder& b, const Out& o, const Value* v, const QParams& p) {
  if (o.raw < 0) return;
  Requant8 r;
  r.y_u8 = p.type == DType::kU8;
  r.y_off = p.zp;
  r.lo = qmin(p.type);
  r.hi = qmax(p.type);
  const int from = o.centered;
  const int to = o.raw;
  const int64_t n = v->tensor_type().shape().numel();
  add(b, b.current(), "Uncenter int8", {from}, {to}, [=](Session& s) mutable {
    r.a = ptr(s, from);
    r.y = ptr(s, to);
    return launch_requant8(r, n, s.stream);
  });
}

Result<bool> lower_quantized(Builder& b, const Node& node) {
  switch (node.kind()) {
    case OpKind::kQuantizeLinear: return lower_quantize(b, node);
    case OpKind::kDequantizeLinear: return lower_dequantize(b, node);
    case OpKind::kQLinearConv: return lower_qlinear_conv(b, node);
    case OpKind::kAdd: {
      std::optional<IntAdd> a = int_add(b, node);
      return a && lower_int_add(b, *a);
    }
    case OpKind::kMaxPool: {
      std::optional<IntPool> p = int_pool(b, node);
      return p && lower_int_pool(b, *p);
    }
    case OpKind::kGlobalAveragePool: {
      std::optional<IntMean> m = int_mean(b, node);
      return m && lower_int_mean(b, *m);
    }
    case OpKind::kSigmoid: {
      std::optional<IntScale> r = int_channel_scale(b, node);
      return r && lower_int_channel_scale(b, *r);
    }
    default: return false;
  }
}

}  // namespace kiln::compiler::cuda
