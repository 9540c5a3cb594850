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
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/int8_gemm.h"
#include "compiler/targets/cuda/program.h"
#include "compiler/targets/cuda/quantized_kernels.h"
#include "core/env.h"
#include "core/half.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

void* ptr(Session& s, int id) {
  return s.device[static_cast<size_t>(id)];
}

void add(Builder& b, const Node& node, std::string kind, std::vector<int> in, std::vector<int> out,
         FunctionStep::Fn fn) {
  b.add_step(std::make_unique<FunctionStep>(node, std::move(kind), std::move(in), std::move(out),
                                            std::move(fn)));
}

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

// Per-tensor quantization parameters: a constant positive scalar scale, a constant scalar zero
// point (absent: 0) and the 8-bit type of `q`.
struct QParams {
  float scale = 1.0f;
  int32_t zp = 0;
  DType type = DType::kU8;
};

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

bool same(const QParams& a, const QParams& b) {
  return a.scale == b.scale && a.zp == b.zp && a.type == b.type;
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

// ---- the patterns ----

// Q(Relu?(Add(DQ(a), DQ(b)))), per-tensor parameters, a and b 8-bit of one static shape.
struct IntAdd {
  const Node* add = nullptr;
  const Node* dq[2] = {nullptr, nullptr};
  QParams in[2];
  const Node* relu = nullptr;
  const Node* q = nullptr;
  QParams out;
};

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

// Q(MaxPool(DQ(x))) with the same parameters on both sides: max commutes with the monotonic
// quantization, so it runs on the 8-bit values.
struct IntPool {
  const Node* dq = nullptr;
  const Node* pool = nullptr;
  const Node* q = nullptr;
  Pool8 p;
};

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

// GlobalAveragePool(DQ(x)) with a per-tensor DQ, x 8-bit 4-D static, an f32 result: the mean of
// the 8-bit values, scaled once (ResNet's head: the DequantizeLinear alone took 0.22 ms at batch
// 256 on an H200, writing 103 MB of f32).
struct IntMean {
  const Node* dq = nullptr;
  const Node* pool = nullptr;
  QParams in;
};

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

// What a QLinearConv needs to run here: 4-D static, a constant s8 filter [K, C, R, S] with zero
// points 0 and per-tensor or per-K scales, group 1, per-tensor x and y parameters, a constant
// int32 bias [K] or none.
struct IntConv {
  QParams x, y;
  const Tensor* w = nullptr;
  std::vector<float> w_scales;
  const Tensor* bias = nullptr;
  WindowGeometry g;
};

std::optional<IntConv> int_conv(const Node& node) {
  if (node.kind() != OpKind::kQLinearConv || node.num_inputs() < 8) return std::nullopt;
  const auto& op = node.attrs<ops::QLinearConv>();
  if (op.group != 1 || !is_static4(node.input(0)) || !is_static4(node.output(0))) {
    return std::nullopt;
  }
  IntConv c;
  std::optional<QParams> x = qparams(node, 1, 2, node.input(0));
  std::optional<QParams> y = qparams(node, 6, 7, node.output(0));
  c.w = node.input(3)->constant_value();
  const Tensor* ws = node.input(4)->constant_value();
  const Tensor* wz = node.input(5)->constant_value();
  if (!x || !y || c.w == nullptr || c.w->dtype() != DType::kI8 || c.w->shape().rank() != 4 ||
      ws == nullptr || ws->dtype() != DType::kF32 || wz == nullptr) {
    return std::nullopt;
  }
  // The input's parameters may be any (an image's QuantizeLinear writes f16 integers for the
  // first convolution); a centered input's must fit (centered_readers, lower_qlinear_conv).
  if (!centerable(*y)) return std::nullopt;
  c.x = *x;
  c.y = *y;
  const int64_t k = c.w->shape()[0];
  if (ws->numel() != 1 && ws->numel() != k) return std::nullopt;
  for (float s : ws->span<float>()) {
    if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
    c.w_scales.push_back(s);
  }
  const auto* zb = static_cast<const uint8_t*>(wz->raw_data());
  for (size_t i = 0; i < wz->nbytes(); ++i) {
    if (zb[i] != 0) return std::nullopt;
  }
  if (node.has_input(8)) {
    c.bias = node.input(8)->constant_value();
    if (c.bias == nullptr || c.bias->dtype() != DType::kI32 || c.bias->numel() != k) {
      return std::nullopt;
    }
  }
  const Shape xs = node.input(0)->tensor_type().shape();
  const Shape yo = node.output(0)->tensor_type().shape();
  if (xs[1] != c.w->shape()[1] || yo[1] != k) return std::nullopt;
  const std::vector<int64_t> in_hw = {xs[2], xs[3]};
  Result<WindowGeometry> g = forward_window(in_hw, {c.w->shape()[2], c.w->shape()[3]},
                                            {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>{yo[2], yo[3]}) return std::nullopt;
  c.g = *g;
  return c;
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

// A stride-2 convolution of an image with even height and width over its 2x2 blocks (space to
// depth: 4x the channels, half the height and width) as a stride-1 one, per spatial dim: input
// row 2 * oy - pad + r is row dy of block oy + b - pre, so filter tap (b, dy) is r = 2 * b + dy -
// 2 * pre + pad (zero outside the filter). For ResNet's 7x7/2 stem with pads 3: 4x4 taps, pads
// 2 and 1, 16 channels (12 used) instead of 8 (3 used): 0.65x the multiply-adds.
struct S2d {
  int64_t taps[2] = {0, 0};
  int64_t pre[2] = {0, 0};
  int64_t post[2] = {0, 0};
};

std::optional<S2d> s2d_geometry(const IntConv& c, const Shape& x, const Shape& y) {
  if (c.g.strides != std::vector<int64_t>{2, 2} || c.g.dilations != std::vector<int64_t>{1, 1} ||
      x[1] > 4 || x[2] % 2 != 0 || x[3] % 2 != 0) {
    return std::nullopt;
  }
  S2d g;
  for (int d = 0; d < 2; ++d) {
    const int64_t pad = c.g.pad_begin[static_cast<size_t>(d)];
    const int64_t r = c.w->shape()[2 + d];
    g.pre[d] = (pad + 1) / 2;
    g.taps[d] = (r - 1 + 2 * g.pre[d] - pad) / 2 + 1;
    g.post[d] = y[2 + d] - x[2 + d] / 2 - g.pre[d] + g.taps[d] - 1;
    if (g.post[d] < 0) return std::nullopt;
  }
  return g;
}

// How the first convolution (a QuantizeLinear's reader) runs.
enum class Stem {
  kS8,   // s8 input, channels padded to 16
  kF16,  // f16 integers in 8 channels
  kS2d,  // f16 integers space-to-depth (s2d_geometry), 16 channels
};

// Whether QuantizeLinear output `v` (an image of `shape`, f32 NCHW `x_layout`) feeds f16 tensor
// cores instead of s8 ones: a first convolution on few channels (not a multiple of 4; 3 for RGB)
// whose only readers are int8 convolutions. Its centered values are then held as f16 integers
// (Buffer::centered, dtype f16), its filter too, and the convolution accumulates in f32: the same
// integer sums as the s8 kernels (|sum| < 2^24), at f16 tensor-core speed. cuDNN's s8 engines
// for a 16-channel 7x7/2 convolution were slow: ResNet-50's stem took 7.18 ms of 14.2 at batch 256
// on an H200. A stride-2 one (one reader) runs space-to-depth. KILN_CUDA_INT8_STEM=int8, f16 or
// s2d picks one (where it applies), to compare them on a GPU.
Stem stem_of(const Builder& b, const Value* v, const Shape& shape, const Int8Layout& x_layout) {
  static const std::string_view forced = [] {
    const char* e = env_flag_c_str(EnvFlag::kCudaInt8Stem);
    return std::string_view(e == nullptr ? "" : e);
  }();
  if (forced == "int8" || shape.rank() != 4 || shape[1] > 8 || shape[1] % 4 == 0 || x_layout.nhwc ||
      v->uses().empty()) {
    return Stem::kS8;
  }
  for (const Value* out : b.graph().outputs()) {
    if (out == v) return Stem::kS8;
  }
  // Only int8 convolutions read it (f16 integers hold any zero point's values exactly).
  for (const auto& use : v->uses()) {
    if (use.node->kind() != OpKind::kQLinearConv || use.index != 0 || !int_conv(*use.node)) {
      return Stem::kS8;
    }
  }
  if (forced == "f16" || v->uses().size() != 1) return Stem::kF16;
  const Node* conv = v->uses().front().node;
  std::optional<IntConv> c = int_conv(*conv);
  const bool s2d = c && s2d_geometry(*c, shape, conv->output(0)->tensor_type().shape());
  return s2d ? Stem::kS2d : Stem::kF16;
}

// Whether `buf`, a centered input (f16 or s8) of logical shape `x`, is space-to-depth
// (Stem::kS2d).
bool is_s2d(const Buffer& buf, const Shape& x) {
  return buf.shape.rank() == 4 && buf.shape[2] != x[2];
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

Int8Layout layout_of(const Buffer& buf, const Shape& logical) {
  Int8Layout l;
  l.n = logical[0];
  l.c = logical.rank() > 1 ? logical[1] : 1;
  l.s = logical.numel() / std::max<int64_t>(l.n * l.c, 1);
  l.nhwc = buf.nhwc;
  l.stored_c = buf.nhwc ? buf.shape[1] : l.c;
  return l;
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

// Where an int8 kernel writes the 8-bit value `v`: its own centered buffer when every reader
// takes that (`raw` -1), else a centered scratch buffer that finish_output converts into `v`'s
// ONNX values (`raw`).
struct Out {
  int centered = -1;
  int raw = -1;
};

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

std::optional<Elem> float_elem(const Value* v) {
  switch (v->tensor_type().dtype) {
    case DType::kF32: return Elem::kF32;
    case DType::kF16: return Elem::kF16;
    case DType::kBF16: return Elem::kBF16;
    default: return std::nullopt;
  }
}

// ---- QuantizeLinear, DequantizeLinear ----

// The own kernel's configuration for the space-to-depth first convolution `conv` of an image of
// `x` (its s8 input written by the QuantizeLinear), or -1 where cuDNN's f16 engines run it.
Result<int> s2d_stem_config(Builder& b, const Node& conv, const Shape& x);

Result<bool> lower_quantize(Builder& b, const Node& node) {
  std::optional<QParams> p = qdq_params(node);
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!p || !x->type().is_tensor() || !x->tensor_type().is_static() || !b.has_buffer(x)) {
    return false;
  }
  const std::optional<Elem> e = float_elem(x);
  const Shape shape = x->tensor_type().shape();
  if (!e || (shape.rank() != 4 && shape.rank() != 2)) return false;
  const int xi = b.stored_buffer(x);
  const Int8Layout xl = layout_of(b.buffer(xi), shape);
  Int8Layout yl = xl;
  int yi = -1;
  bool y_u8 = false;
  int32_t y_off = 0;
  auto [lo, hi] = centered_bounds(*p, false);
  const Stem stem = *e == Elem::kF32 ? stem_of(b, y, shape, xl) : Stem::kS8;
  // The first convolution's f16 input: whole quantized values, centered, NHWC.
  const auto define_f16 = [&](Shape f16_shape) {
    Buffer buf;
    buf.dtype = DType::kF16;
    buf.shape = std::move(f16_shape);
    buf.nhwc = true;
    buf.centered = true;
    buf.bytes = static_cast<size_t>(buf.shape.numel()) * 2;
    return b.define_buffer(y, std::move(buf));
  };
  const float scale = p->scale;
  const int32_t zp = p->zp;
  const int32_t q_lo = qmin(p->type);
  const int32_t q_hi = qmax(p->type);
  if (stem == Stem::kS2d) {
    // s8 straight away where the own kernel runs the convolution (its clamp keeping the centered
    // values in s8, as the s8 path's), else f16 integers for cuDNN.
    KILN_ASSIGN_OR_RETURN(const int config, s2d_stem_config(b, *y->uses().front().node, shape));
    const bool s8 = config >= 0 && centerable(*p);
    const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
    const Shape s2d_shape{n, 16, h / 2, w / 2};
    yi = s8 ? new_centered(b, y, s2d_shape, 16) : define_f16(s2d_shape);
    const int32_t s_lo = s8 ? std::max(q_lo, zp - 128) : q_lo;
    const int32_t s_hi = s8 ? std::min(q_hi, zp + 127) : q_hi;
    add(b, node, s8 ? "QuantizeLinear s2d int8" : "QuantizeLinear f16 s2d", {xi}, {yi},
        [=](Session& ss) {
          return launch_quantize_s2d(static_cast<const float*>(ptr(ss, xi)), n, c, h, w, scale, zp,
                                     s_lo, s_hi, s8, ptr(ss, yi), ss.stream);
        });
    return true;
  }
  if (stem == Stem::kF16) {
    yi = define_f16(Shape{shape[0], 8, shape[2], shape[3]});
    const int64_t n = shape[0], c = shape[1], s = shape[2] * shape[3];
    add(b, node, "QuantizeLinear f16", {xi}, {yi}, [=](Session& ss) {
      return launch_quantize_to_f16x8(static_cast<const float*>(ptr(ss, xi)), n, c, s, scale, zp,
                                      q_lo, q_hi, ptr(ss, yi), ss.stream);
    });
    return true;
  }
  if (centerable(*p) && centered_readers(b, y)) {
    // Channels that are not a multiple of 4 are padded for the int8 convolutions: an image's 3
    // to 16 (16-byte pixels; with 4 the stem convolution took 11.4 ms on an H200 at batch 256),
    // more than 16 to a multiple of 4. Others stay as they are, as the int8 Add and MaxPool
    // (which take multiples of 4 only) expect.
    const int64_t c = shape.rank() == 4 ? shape[1] : 0;
    const int64_t stored_c = c % 4 == 0 ? c : c < 16 ? 16 : round_up(c, 4);
    yi = new_centered(b, y, shape, stored_c);
    yl = layout_of(b.buffer(yi), shape);
  } else {
    yi = b.define(y, xl.nhwc);
    yl.stored_c = yl.c;
    y_u8 = p->type == DType::kU8;
    y_off = p->zp;
    lo = qmin(p->type);
    hi = qmax(p->type);
  }
  add(b, node, "QuantizeLinear", {xi}, {yi}, [=, e = *e, lo = lo, hi = hi](Session& s) {
    return launch_quantize8(e, ptr(s, xi), xl, ptr(s, yi), yl, y_u8, scale, y_off, lo, hi,
                            s.stream);
  });
  return true;
}

// A DequantizeLinear of a constant: its f32 values, computed here (per-tensor or per-axis).
bool lower_constant_dequantize(Builder& b, const Node& node) {
  const Tensor* q = node.input(0)->constant_value();
  const Tensor* scale = node.input(1)->constant_value();
  const Tensor* zp = node.has_input(2) ? node.input(2)->constant_value() : nullptr;
  if (q == nullptr || scale == nullptr || scale->dtype() != DType::kF32 ||
      node.output(0)->tensor_type().dtype != DType::kF32 || !is_8bit(q->dtype()) ||
      (node.has_input(2) &&
       (zp == nullptr || zp->dtype() != q->dtype() || zp->numel() != scale->numel()))) {
    return false;
  }
  const Shape shape = q->shape();
  int64_t axis = node.attrs<ops::DequantizeLinear>().axis;
  if (axis < 0) axis += shape.rank();
  const int64_t groups = scale->numel();
  if (groups != 1 && (axis < 0 || axis >= shape.rank() || shape[static_cast<int>(axis)] != groups ||
                      scale->shape().rank() != 1)) {
    return false;
  }
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < shape.rank(); ++d) inner *= shape[d];
  std::vector<uint8_t> bytes(static_cast<size_t>(shape.numel()) * sizeof(float));
  auto* out = reinterpret_cast<float*>(bytes.data());
  const bool u8 = q->dtype() == DType::kU8;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const int64_t g = groups == 1 ? 0 : (i / inner) % groups;
    const int32_t v = u8 ? q->data<uint8_t>()[i] : q->data<int8_t>()[i];
    const int32_t z = zp == nullptr ? 0 : u8 ? zp->data<uint8_t>()[g] : zp->data<int8_t>()[g];
    out[i] = scale->data<float>()[g] * static_cast<float>(v - z);
  }
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Buffer buf;
  buf.dtype = DType::kF32;
  buf.shape = shape;
  buf.bytes = data->size();
  buf.constant = true;
  buf.host = data->data();
  buf.owned = std::move(data);
  b.define_buffer(node.output(0), std::move(buf));
  return true;
}

bool lower_dequantize(Builder& b, const Node& node) {
  if (node.input(0)->constant_value() != nullptr) return lower_constant_dequantize(b, node);
  if (deferred_dq(b, node)) return true;  // lowered with its reader
  std::optional<QParams> p = qdq_params(node);
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!p || !x->tensor_type().is_static() || !b.has_buffer(x)) return false;
  const std::optional<Elem> e = float_elem(y);
  const Shape shape = x->tensor_type().shape();
  if (!e || (shape.rank() != 4 && shape.rank() != 2)) return false;
  const int xi = b.stored_buffer(x);
  const Buffer& xb = b.buffer(xi);
  const Int8Layout xl = layout_of(xb, shape);
  const bool x_u8 = !xb.centered && p->type == DType::kU8;
  const int32_t x_off = xb.centered ? 0 : p->zp;
  const int yi = b.define(y, xl.nhwc);
  Int8Layout yl = xl;
  yl.stored_c = yl.c;
  const float scale = p->scale;
  add(b, node, "DequantizeLinear", {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_dequantize8(ptr(s, xi), xl, x_u8, x_off, scale, e, ptr(s, yi), yl, s.stream);
  });
  return true;
}

// ---- the int8 residual Add and MaxPool ----

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

// ---- QLinearConv on a cuDNN graph ----

struct Desc {
  explicit Desc(cudnnBackendDescriptorType_t type) {
    status = cudnnBackendCreateDescriptor(type, &d);
  }
  ~Desc() {
    if (d != nullptr) cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const T* values) {
    if (status == CUDNN_STATUS_SUCCESS) {
      status = cudnnBackendSetAttribute(d, name, type, count, values);
    }
  }
  Status finalize(std::string_view what) {
    if (status == CUDNN_STATUS_SUCCESS) status = cudnnBackendFinalize(d);
    return check_cudnn(status, what);
  }
  cudnnBackendDescriptor_t d = nullptr;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
};

using DescPtr = std::shared_ptr<Desc>;

// The tensors' unique ids in the variant pack.
enum : int64_t { kX = 1, kW, kScale, kBias, kZ, kY, kRescale, kVirtual };

// An int8 convolution's problem: shapes (NCHW order, stored NHWC), geometry, the residual and the
// output clamp.
struct ConvProblem {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, oh = 0, ow = 0;
  std::vector<int64_t> pre, post, strides, dilations;
  // The residual z enters unscaled: scale and bias are divided by its scale, z added, and the sum
  // multiplied back by a per-channel tensor (kRescale) holding that scale (pointwise ops whose
  // operands are all tensors; no alpha attributes).
  bool residual = false;
  float residual_scale = 0.0f;
  int32_t lo = -128, hi = 127;
  // f16 input and filter holding integers (half_stem), f32 accumulation; the output f16 (the
  // scaled value before rounding, quantized by a step after) where no engine writes s8.
  bool half = false;
  bool half_out = false;

  size_t x_bytes() const { return static_cast<size_t>(n * c * h * w) * (half ? 2 : 1); }
  size_t w_bytes() const { return static_cast<size_t>(k * c * r * s) * (half ? 2 : 1); }
  size_t y_bytes() const { return static_cast<size_t>(n * k * oh * ow) * (half_out ? 2 : 1); }

  std::string key() const {
    return fmt::format(
        "qconv {} nhwc x[{},{},{},{}] w[{},{},{},{}] pads{},{},{},{} strides{},{} "
        "dilations{},{} residual{} clamp{},{}",
        half ? (half_out ? "f16->f16" : "f16->s8") : "s8", n, c, h, w, k, c, r, s, pre[0], pre[1],
        post[0], post[1], strides[0], strides[1], dilations[0], dilations[1], residual ? 1 : 0, lo,
        hi);
  }
};

// The operation graph: conv (s32) -> * scale[K] -> + bias[K] -> [+ residual_scale * z] -> clamp
// -> s8 y, every intermediate virtual f32.
struct ConvGraph {
  std::vector<DescPtr> keep;  // every descriptor the graph refers to
  DescPtr graph;
};

Result<DescPtr> tensor(ConvGraph& cg, int64_t uid, cudnnDataType_t type, std::vector<int64_t> nchw,
                       bool is_virtual) {
  // NHWC strides of logical NCHW dims.
  const int64_t c = nchw[1], h = nchw[2], w = nchw[3];
  const std::vector<int64_t> strides = {h * w * c, 1, w * c, c};
  auto t = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, nchw.data());
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  KILN_RETURN_IF_ERROR(t->finalize("int8 convolution tensor"));
  cg.keep.push_back(t);
  return t;
}

// A pointwise op y = mode(x, b) (b may be null); `clip` sets a ReLU's bounds.
Result<DescPtr> pointwise(ConvGraph& cg, cudnnPointwiseMode_t mode, const DescPtr& x,
                          const DescPtr& b, const DescPtr& y,
                          std::optional<std::pair<float, float>> clip) {
  auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  if (clip) {
    pw->set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_FLOAT, 1, &clip->first);
    pw->set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_FLOAT, 1, &clip->second);
  }
  KILN_RETURN_IF_ERROR(pw->finalize("int8 convolution pointwise descriptor"));
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw->d);
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
  if (b != nullptr) {
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d);
  }
  op->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y->d);
  KILN_RETURN_IF_ERROR(op->finalize("int8 convolution pointwise op"));
  cg.keep.push_back(pw);
  cg.keep.push_back(op);
  return op;
}

Result<ConvGraph> conv_graph(cudnnHandle_t handle, const ConvProblem& p) {
  ConvGraph cg;
  const std::vector<int64_t> xd = {p.n, p.c, p.h, p.w};
  const std::vector<int64_t> wd = {p.k, p.c, p.r, p.s};
  const std::vector<int64_t> yd = {p.n, p.k, p.oh, p.ow};
  const std::vector<int64_t> kd = {1, p.k, 1, 1};
  int64_t next_virtual = kVirtual;
  const cudnnDataType_t in_type = p.half ? CUDNN_DATA_HALF : CUDNN_DATA_INT8;
  KILN_ASSIGN_OR_RETURN(DescPtr x, tensor(cg, kX, in_type, xd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr w, tensor(cg, kW, in_type, wd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr acc, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
  KILN_ASSIGN_OR_RETURN(DescPtr scale, tensor(cg, kScale, CUDNN_DATA_FLOAT, kd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr bias, tensor(cg, kBias, CUDNN_DATA_FLOAT, kd, false));
  KILN_ASSIGN_OR_RETURN(DescPtr scaled, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
  KILN_ASSIGN_OR_RETURN(DescPtr y,
                        tensor(cg, kY, p.half_out ? CUDNN_DATA_HALF : CUDNN_DATA_INT8, yd, false));
  // The s8 output saturates to [-128, 127]; a ReLU clamps tighter where the bounds say.
  const bool clamp = p.lo > -128 || p.hi < 127;
  KILN_ASSIGN_OR_RETURN(DescPtr biased, (clamp || p.residual)
                                            ? tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true)
                                            : Result<DescPtr>(y));
  auto conv = std::make_shared<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = p.half ? CUDNN_DATA_FLOAT : CUDNN_DATA_INT32;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p.dilations.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, p.strides.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p.pre.data());
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p.post.data());
  KILN_RETURN_IF_ERROR(conv->finalize("int8 convolution descriptor"));
  cg.keep.push_back(conv);
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float one = 1.0f;
  const float zero = 0.0f;
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &acc->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &conv->d);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  KILN_RETURN_IF_ERROR(op->finalize("int8 convolution op"));
  cg.keep.push_back(op);
  std::vector<cudnnBackendDescriptor_t> ops = {op->d};
  KILN_ASSIGN_OR_RETURN(DescPtr mul,
                        pointwise(cg, CUDNN_POINTWISE_MUL, acc, scale, scaled, std::nullopt));
  ops.push_back(mul->d);
  KILN_ASSIGN_OR_RETURN(DescPtr add_bias,
                        pointwise(cg, CUDNN_POINTWISE_ADD, scaled, bias, biased, std::nullopt));
  ops.push_back(add_bias->d);
  DescPtr last = biased;
  if (p.residual) {
    KILN_ASSIGN_OR_RETURN(DescPtr z, tensor(cg, kZ, CUDNN_DATA_INT8, yd, false));
    KILN_ASSIGN_OR_RETURN(DescPtr summed, tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true));
    KILN_ASSIGN_OR_RETURN(DescPtr add_z,
                          pointwise(cg, CUDNN_POINTWISE_ADD, biased, z, summed, std::nullopt));
    ops.push_back(add_z->d);
    last = summed;
    {
      KILN_ASSIGN_OR_RETURN(DescPtr factor, tensor(cg, kRescale, CUDNN_DATA_FLOAT, kd, false));
      KILN_ASSIGN_OR_RETURN(
          DescPtr scaled_sum,
          clamp ? tensor(cg, next_virtual++, CUDNN_DATA_FLOAT, yd, true) : Result<DescPtr>(y));
      KILN_ASSIGN_OR_RETURN(DescPtr mul_back, pointwise(cg, CUDNN_POINTWISE_MUL, summed, factor,
                                                        scaled_sum, std::nullopt));
      ops.push_back(mul_back->d);
      last = scaled_sum;
    }
  }
  if (clamp) {
    // A plain ReLU where the bounds are [0, 127] (the output's saturation does the rest).
    std::optional<std::pair<float, float>> clip;
    if (p.lo != 0 || p.hi != 127) {
      clip = std::make_pair(static_cast<float>(p.lo), static_cast<float>(p.hi));
    }
    KILN_ASSIGN_OR_RETURN(DescPtr relu,
                          pointwise(cg, CUDNN_POINTWISE_RELU_FWD, last, nullptr, y, clip));
    ops.push_back(relu->d);
  }
  cg.graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cg.graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                static_cast<int64_t>(ops.size()), ops.data());
  cg.graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  KILN_RETURN_IF_ERROR(cg.graph->finalize("int8 convolution graph"));
  return cg;
}

// An execution plan of the graph (which it keeps alive) and its workspace.
struct ConvPlan {
  ConvGraph graph;
  std::vector<DescPtr> configs;
  DescPtr plan;
  size_t workspace = 0;
};

// The plans of cuDNN's first `limit` heuristic candidates (mode A), in order; null for one that
// does not finalize (so that indices stay the heuristic's).
std::vector<std::shared_ptr<ConvPlan>> candidate_plans(cudnnHandle_t handle, const ConvGraph& cg,
                                                       size_t limit) {
  std::vector<std::shared_ptr<ConvPlan>> out;
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cg.graph->d);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (!heur.finalize("heuristics").ok()) return out;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               0, &count, nullptr) != CUDNN_STATUS_SUCCESS) {
    return out;
  }
  std::vector<DescPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->d);
  }
  int64_t got = 0;
  if (count == 0 ||
      cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               count, &got, raw.data()) != CUDNN_STATUS_SUCCESS) {
    return out;
  }
  for (int64_t i = 0; i < got && out.size() < limit; ++i) {
    auto plan = std::make_shared<ConvPlan>();
    plan->graph = cg;
    plan->configs = {configs[static_cast<size_t>(i)]};
    plan->plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                    &configs[static_cast<size_t>(i)]->d);
    if (!plan->plan->finalize("plan").ok()) {
      out.push_back(nullptr);  // keeps the heuristic's index
      continue;
    }
    int64_t workspace = 0;
    cudnnBackendGetAttribute(plan->plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                             CUDNN_TYPE_INT64, 1, nullptr, &workspace);
    plan->workspace = static_cast<size_t>(std::max<int64_t>(workspace, 0));
    out.push_back(plan);
  }
  return out;
}

// Device pointers of one execution.
struct ConvArgs {
  void* x = nullptr;
  void* w = nullptr;
  void* scale = nullptr;
  void* bias = nullptr;
  void* z = nullptr;
  void* rescale = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
};

Status execute(cudnnHandle_t handle, const ConvPlan& plan, const ConvArgs& a) {
  std::vector<int64_t> uids = {kX, kW, kScale, kBias, kY};
  std::vector<void*> ptrs = {a.x, a.w, a.scale, a.bias, a.y};
  if (a.z != nullptr) {
    uids.push_back(kZ);
    ptrs.push_back(a.z);
  }
  if (a.rescale != nullptr) {
    uids.push_back(kRescale);
    ptrs.push_back(a.rescale);
  }
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &a.workspace);
  KILN_RETURN_IF_ERROR(pack.finalize("int8 convolution arguments"));
  return check_cudnn(cudnnBackendExecute(handle, plan.plan->d, pack.d), "int8 convolution");
}

// The GPU milliseconds of 3 runs of `run` after one trial on scratch operands of `p` (with
// `workspace` bytes), on a stream of its own; infinity when it fails.
float scratch_ms(const ConvProblem& p, size_t workspace,
                 const std::function<Status(const ConvArgs&, cudaStream_t)>& run) {
  std::vector<void*> blocks;
  auto block = [&](size_t bytes, int fill) -> void* {
    void* q = nullptr;
    if (cudaMalloc(&q, std::max<size_t>(bytes, 1)) != cudaSuccess) return nullptr;
    blocks.push_back(q);
    cudaMemset(q, fill, bytes);
    return q;
  };
  ConvArgs a;
  a.x = block(p.x_bytes(), 0x1d);
  a.w = block(p.w_bytes(), 0x05);
  a.scale = block(static_cast<size_t>(p.k) * 4, 0x3a);  // about 7e-4 as f32
  a.bias = block(static_cast<size_t>(p.k) * 4, 0x3a);
  a.y = block(p.y_bytes(), 0);
  if (p.residual) a.z = block(static_cast<size_t>(p.n * p.k * p.oh * p.ow), 0x11);
  if (p.residual) a.rescale = block(static_cast<size_t>(p.k) * 4, 0x3f);
  a.workspace = block(workspace, 0);
  float ms = INFINITY;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  const bool ready = std::find(blocks.begin(), blocks.end(), nullptr) == blocks.end() &&
                     a.x != nullptr && a.w != nullptr && a.y != nullptr &&
                     cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
                     cudaEventCreate(&start) == cudaSuccess &&
                     cudaEventCreate(&stop) == cudaSuccess;
  if (ready && run(a, stream).ok() && cudaStreamSynchronize(stream) == cudaSuccess) {
    bool ok = cudaEventRecord(start, stream) == cudaSuccess;
    for (int i = 0; i < 3 && ok; ++i) ok = run(a, stream).ok();
    float t = 0;
    if (ok && cudaEventRecord(stop, stream) == cudaSuccess &&
        cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&t, start, stop) == cudaSuccess) {
      ms = t / 3;
    }
  }
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (stream != nullptr) cudaStreamDestroy(stream);
  for (void* q : blocks) {
    if (q != nullptr) cudaFree(q);
  }
  cudaGetLastError();
  return ms;
}

// The GPU milliseconds of one execution of `plan` (scratch_ms).
float plan_ms(cudnnHandle_t handle, const ConvPlan& plan, const ConvProblem& p) {
  const float ms = scratch_ms(p, plan.workspace, [&](const ConvArgs& a, cudaStream_t stream) {
    KILN_RETURN_IF_ERROR(check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream"));
    return execute(handle, plan, a);
  });
  cudnnSetStream(handle, nullptr);
  return ms;
}

// Each candidate's plan finalization can compile kernels (about 0.4 s): with 6, ResNet-50's 53
// convolutions took over 100 s to compile; the fastest was among the first 3 in every case of
// bench/quant/gpu/int8_conv_micro.cu.
// The f16 first convolution (one convolution, the slowest step) gets more. (8 for ResNet-50's
// residual graphs too changed no step's time measurably on an H200 and took its compile from 28 to
// 50 s.)
constexpr size_t kCandidates = 3;
constexpr size_t kMoreCandidates = 8;
constexpr size_t kMaxWorkspace = size_t{256} << 20;

// The plan for `p`: the candidate stored for this GPU when it still finalizes, else the fastest
// of cuDNN's first kCandidates heuristic candidates (its time in `*ms`, else NaN there); null when
// none runs.
Result<std::shared_ptr<ConvPlan>> choose_plan(Builder& b, const ConvProblem& p,
                                              float* ms = nullptr) {
  const size_t limit = p.half ? kMoreCandidates : kCandidates;
  if (ms != nullptr) *ms = NAN;
  // A graph cuDNN does not accept (an op or type combination it lacks) has no plan either.
  Result<ConvGraph> cg = conv_graph(b.cudnn(), p);
  if (!cg.ok()) return std::shared_ptr<ConvPlan>();
  const std::string key = p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    // Only the candidates up to the stored one are finalized (each can compile kernels).
    std::optional<int32_t> i = choice_value<int32_t>(*known);
    if (i && *i >= 0 && static_cast<size_t>(*i) < limit) {
      std::vector<std::shared_ptr<ConvPlan>> plans =
          candidate_plans(b.cudnn(), *cg, static_cast<size_t>(*i) + 1);
      if (static_cast<size_t>(*i) < plans.size() && plans[*i] != nullptr &&
          plans[*i]->workspace <= kMaxWorkspace) {
        b.record_choice(key, *known, false);
        return plans[*i];
      }
    }
  }
  std::vector<std::shared_ptr<ConvPlan>> plans = candidate_plans(b.cudnn(), *cg, limit);
  int32_t best = -1;
  float best_ms = INFINITY;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i] == nullptr || plans[i]->workspace > kMaxWorkspace) continue;
    const float ms = plan_ms(b.cudnn(), *plans[i], p);
    if (ms < best_ms) {
      best_ms = ms;
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0) return std::shared_ptr<ConvPlan>();
  if (ms != nullptr) *ms = best_ms;
  b.record_choice(key, choice_bytes(best), true);
  return plans[static_cast<size_t>(best)];
}

// ---- convolutions on the own int8 implicit GEMM (int8_gemm.h) ----

// `p` as the own kernel's problem when it has s8 input, no dilation, equal strides 1 or 2, and
// the kernel takes it.
std::optional<Int8Gemm> gemm_problem(const ConvProblem& p) {
  if (p.half || p.dilations != std::vector<int64_t>{1, 1} || p.strides[0] != p.strides[1]) {
    return std::nullopt;
  }
  Int8Gemm g;
  g.n = p.n;
  g.h = p.h;
  g.w = p.w;
  g.c = p.c;
  g.k = p.k;
  g.oh = p.oh;
  g.ow = p.ow;
  g.r = p.r;
  g.s = p.s;
  g.ph = p.pre[0];
  g.pw = p.pre[1];
  g.stride = static_cast<int>(p.strides[0]);
  g.residual = p.residual;
  g.rescale = p.residual_scale;
  g.lo = p.lo;
  g.hi = p.hi;
  if (!int8_gemm_supported(g)) return std::nullopt;
  return g;
}

Status run_gemm(int config, const Int8Gemm& g, const ConvArgs& a, void* stream) {
  return launch_int8_gemm(config, g, a.x, a.w, static_cast<const float*>(a.scale),
                          static_cast<const float*>(a.bias), a.z, a.y, stream);
}

// How a convolution runs: the own kernel's tile configuration (`config` >= 0), else cuDNN's
// `plan` (null when cuDNN has none for `p`, which the caller then retries without the residual).
struct KernelChoice {
  int config = -1;
  std::shared_ptr<ConvPlan> plan;
};

// The fastest of cuDNN's plan and the own kernel's configurations for `g` (`p`'s), timed on
// scratch operands, kept as a tuning choice. KILN_CUDA_INT8_GEMM=0 never takes the own kernel,
// =1 always (its fastest configuration).
Result<KernelChoice> choose_kernel(Builder& b, const ConvProblem& p, const Int8Gemm& g) {
  const char* env = env_flag_c_str(EnvFlag::kCudaInt8Gemm);
  const std::string_view forced(env == nullptr ? "" : env);
  KernelChoice c;
  if (forced == "0") {
    KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p));
    return c;
  }
  const std::string key = "int8 gemm of " + p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key); known != nullptr && forced != "1") {
    std::optional<int32_t> config = choice_value<int32_t>(*known);
    if (config && *config >= 0 && *config < int8_gemm_configs()) {
      b.record_choice(key, *known, false);
      c.config = *config;
      return c;
    }
    if (config && *config == -1) {
      KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p));
      if (c.plan != nullptr) {
        b.record_choice(key, *known, false);
        return c;
      }
    }
  }
  float cudnn_ms = INFINITY;
  if (forced != "1") {
    float ms = NAN;
    KILN_ASSIGN_OR_RETURN(c.plan, choose_plan(b, p, &ms));
    // A plan chosen from stored tuning comes without its time.
    if (c.plan != nullptr) cudnn_ms = std::isnan(ms) ? plan_ms(b.cudnn(), *c.plan, p) : ms;
  }
  float best_ms = INFINITY;
  for (int config = 0; config < int8_gemm_configs(); ++config) {
    const float ms = scratch_ms(
        p, 0, [&](const ConvArgs& a, cudaStream_t s) { return run_gemm(config, g, a, s); });
    log(LogLevel::kDebug, "cuda target: {}: own {} {:.4f} ms", key, int8_gemm_config_name(config),
        ms);
    if (ms < best_ms) {
      best_ms = ms;
      c.config = config;
    }
  }
  if (!(best_ms < cudnn_ms)) c.config = -1;
  log(LogLevel::kDebug, "cuda target: {}: own {:.4f} ms, cuDNN {:.4f} ms: {}", key, best_ms,
      cudnn_ms, c.config >= 0 ? int8_gemm_config_name(c.config) : "cuDNN");
  if (c.config >= 0) c.plan.reset();
  if (c.config >= 0 || c.plan != nullptr) {
    b.record_choice(key, choice_bytes(static_cast<int32_t>(c.config)), true);
  }
  return c;
}

// The NHWC layout of [n, c, s] with c channels stored.
Int8Layout nhwc_layout(int64_t n, int64_t c, int64_t s) {
  Int8Layout l;
  l.n = n;
  l.c = c;
  l.s = s;
  l.stored_c = c;
  l.nhwc = true;
  return l;
}

// The GPU milliseconds of rounding f16 NHWC [n, c, s] into s8 (launch_quantize8 with scale 1),
// over 3 launches after one; infinity when it fails.
float f16_to_s8_ms(int64_t n, int64_t c, int64_t s) {
  const int64_t count = n * c * s;
  const Int8Layout l = nhwc_layout(n, c, s);
  void* from = nullptr;
  void* to = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  float ms = INFINITY;
  if (cudaMalloc(&from, static_cast<size_t>(count) * 2) == cudaSuccess &&
      cudaMalloc(&to, static_cast<size_t>(count)) == cudaSuccess &&
      cudaMemset(from, 0x1d, static_cast<size_t>(count) * 2) == cudaSuccess &&
      cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) {
    auto once = [&] {
      return launch_quantize8(Elem::kF16, from, l, to, l, false, 1.0f, 0, -128, 127, nullptr);
    };
    bool ok = once().ok() && cudaEventRecord(start) == cudaSuccess;
    for (int i = 0; i < 3 && ok; ++i) ok = once().ok();
    float t = 0;
    if (ok && cudaEventRecord(stop) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&t, start, stop) == cudaSuccess) {
      ms = t / 3;
    }
  }
  cudaDeviceSynchronize();
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (from != nullptr) cudaFree(from);
  if (to != nullptr) cudaFree(to);
  cudaGetLastError();
  return ms;
}

// The same for an f16 output of `p` (the step after an f16-output plan).
float round_ms(const ConvProblem& p) {
  return f16_to_s8_ms(p.n, p.k, p.oh * p.ow);
}

// The plan of an f16-input convolution (half_stem's; `y` its output's parameters): an s8 output
// clamped in the graph, or an f16 output (p.half_out) that a step rounds, whichever runs faster
// with that step counted (the answer stored as a choice too). Sets p's output type and clamp.
Result<std::shared_ptr<ConvPlan>> choose_half_plan(Builder& b, ConvProblem& p, const QParams& y) {
  auto variant = [&](bool f16_out, float* ms) -> Result<std::shared_ptr<ConvPlan>> {
    p.half_out = f16_out;
    std::tie(p.lo, p.hi) = f16_out ? std::make_pair(-128, 127) : centered_bounds(y, false);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> plan, choose_plan(b, p, ms));
    if (plan == nullptr && p.lo < 0) {
      // As in lower_qlinear_conv: the s8 saturation alone.
      std::tie(p.lo, p.hi) = std::make_pair(-128, 127);
      KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p, ms));
    }
    return plan;
  };
  p.half_out = false;
  const std::string key = "qconv f16 output of " + p.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    if (std::optional<int32_t> f16_out = choice_value<int32_t>(*known)) {
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> plan, variant(*f16_out != 0, nullptr));
      if (plan != nullptr) {
        b.record_choice(key, *known, false);
        return plan;
      }
    }
  }
  float s8_ms = NAN;
  float f16_ms = NAN;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> s8_plan, variant(false, &s8_ms));
  const ConvProblem s8_problem = p;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> f16_plan, variant(true, &f16_ms));
  if (f16_plan != nullptr) f16_ms += round_ms(p);
  // NaN (a stored plan choice without its time) loses to a measured time.
  const bool f16_out = f16_plan != nullptr && (s8_plan == nullptr || !(s8_ms <= f16_ms));
  b.record_choice(key, choice_bytes(static_cast<int32_t>(f16_out ? 1 : 0)), true);
  if (f16_out) return f16_plan;
  p = s8_problem;
  return s8_plan;
}

// Whether the space-to-depth first convolution runs faster on the own s8 kernel (its input
// quantized to s8 by lower_quantize) than on cuDNN's f16 `plan` for `half` (with its rounding
// step): the own kernel's configuration, or -1. Timed on scratch operands, kept as a
// tuning choice; KILN_CUDA_INT8_GEMM=0 or 1 as in choose_kernel.
Result<int> choose_stem(Builder& b, const ConvProblem& half, const ConvPlan* plan,
                        const ConvProblem& s8, const Int8Gemm& g) {
  const char* env = env_flag_c_str(EnvFlag::kCudaInt8Gemm);
  const std::string_view forced(env == nullptr ? "" : env);
  if (forced == "0") return -1;
  const std::string key = "int8 gemm stem of " + s8.key();
  if (const std::vector<uint8_t>* known = b.known_choice(key); known != nullptr && forced != "1") {
    std::optional<int32_t> config = choice_value<int32_t>(*known);
    if (config && *config >= -1 && *config < int8_gemm_configs() && (*config >= 0 || plan)) {
      b.record_choice(key, *known, false);
      return *config;
    }
  }
  float cudnn_ms = INFINITY;
  if (plan != nullptr && forced != "1") {
    cudnn_ms = plan_ms(b.cudnn(), *plan, half) + (half.half_out ? round_ms(half) : 0.0f);
  }
  int best = -1;
  float best_ms = INFINITY;
  for (int config = 0; config < int8_gemm_configs(); ++config) {
    const float ms = scratch_ms(
        s8, 0, [&](const ConvArgs& a, cudaStream_t st) { return run_gemm(config, g, a, st); });
    if (ms < best_ms) {
      best_ms = ms;
      best = config;
    }
  }
  if (!(best_ms < cudnn_ms)) best = -1;
  log(LogLevel::kDebug, "cuda target: {}: own {:.4f} ms, cuDNN {:.4f} ms: {}", key, best_ms,
      cudnn_ms, best >= 0 ? int8_gemm_config_name(best) : "cuDNN");
  if (best >= 0 || plan != nullptr)
    b.record_choice(key, choice_bytes(static_cast<int32_t>(best)), true);
  return best;
}

// The s8 filter of `c` (on `channels` input channels) rearranged for the space-to-depth problem
// `p` (s2d_geometry): s8 [K, taps, taps, 16] with channel (dy * 2 + dx) * channels + ci.
std::vector<uint8_t> s2d_filter(const IntConv& c, int64_t channels, const ConvProblem& p) {
  const Shape ws = c.w->shape();
  const int64_t pad_h = c.g.pad_begin[0];
  const int64_t pad_w = c.g.pad_begin[1];
  std::vector<uint8_t> out(static_cast<size_t>(p.k * p.r * p.s * p.c), 0);
  const auto* w = c.w->data<int8_t>();
  for (int64_t k = 0; k < p.k; ++k) {
    for (int64_t by = 0; by < p.r; ++by) {
      for (int64_t bx = 0; bx < p.s; ++bx) {
        for (int64_t d = 0; d < 4; ++d) {
          const int64_t r = 2 * by + d / 2 - 2 * p.pre[0] + pad_h;
          const int64_t q = 2 * bx + d % 2 - 2 * p.pre[1] + pad_w;
          if (r < 0 || r >= ws[2] || q < 0 || q >= ws[3]) continue;
          for (int64_t ci = 0; ci < channels; ++ci) {
            const size_t at =
                static_cast<size_t>(((k * p.r + by) * p.s + bx) * p.c + d * channels + ci);
            out[at] = static_cast<uint8_t>(w[((k * ws[1] + ci) * ws[2] + r) * ws[3] + q]);
          }
        }
      }
    }
  }
  return out;
}

// The problem of convolution `c` (input `x`, output `y`) on `stored_c` input channels: f16
// integers when `half`, space-to-depth (s2d_geometry) when `s2d`.
ConvProblem conv_problem(const IntConv& c, const Shape& x, const Shape& y, int64_t stored_c,
                         bool half, bool s2d) {
  const Shape w = c.w->shape();
  ConvProblem p;
  p.n = x[0];
  p.c = stored_c;
  p.h = x[2];
  p.w = x[3];
  p.k = w[0];
  p.r = w[2];
  p.s = w[3];
  p.oh = y[2];
  p.ow = y[3];
  p.pre = c.g.pad_begin;
  p.post = c.g.pad_end;
  p.strides = c.g.strides;
  p.dilations = c.g.dilations;
  p.half = half;
  if (s2d) {
    const S2d g = *s2d_geometry(c, x, y);
    p.h = x[2] / 2;
    p.w = x[3] / 2;
    p.r = g.taps[0];
    p.s = g.taps[1];
    p.pre = {g.pre[0], g.pre[1]};
    p.post = {g.post[0], g.post[1]};
    p.strides = {1, 1};
  }
  return p;
}

Result<int> s2d_stem_config(Builder& b, const Node& conv, const Shape& x) {
  std::optional<IntConv> c = int_conv(conv);
  if (!c) return -1;
  ConvProblem half = conv_problem(*c, x, conv.output(0)->tensor_type().shape(), 16, true, true);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvPlan> plan, choose_half_plan(b, half, c->y));
  ConvProblem q = half;
  q.half = false;
  q.half_out = false;
  std::tie(q.lo, q.hi) = centered_bounds(c->y, false);
  std::optional<Int8Gemm> gemm = gemm_problem(q);
  if (!gemm) return -1;
  return choose_stem(b, half, plan.get(), q, *gemm);
}

// The residual Add a convolution's output feeds, when its other operand is computed already.
std::optional<IntAdd> fusable_add(const Builder& b, const Node& node) {
  const Node* dq = sole_reader(b, node.output(0));
  if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear) return std::nullopt;
  const Node* sum = sole_reader(b, dq->output(0));
  if (sum == nullptr) return std::nullopt;
  std::optional<IntAdd> a = int_add(b, *sum);
  if (!a) return std::nullopt;
  const int other = a->dq[0] == dq ? 1 : 0;
  if (!b.has_buffer(a->dq[other]->input(0))) return std::nullopt;
  // The convolution's output is the first operand.
  if (other == 0) {
    std::swap(a->dq[0], a->dq[1]);
    std::swap(a->in[0], a->in[1]);
  }
  return a;
}

Result<bool> lower_qlinear_conv(Builder& b, const Node& node) {
  std::optional<IntConv> c = int_conv(node);
  if (!c) return false;
  const Value* xv = node.input(0);
  const Shape x = xv->tensor_type().shape();
  const Shape y = node.output(0)->tensor_type().shape();
  const Shape w = c->w->shape();
  // An 8-bit input of other than whole groups of 4 channels that no QuantizeLinear here padded
  // (a graph input, a convolution's output of 31 channels): the node runs on the host kernels.
  if (!b.buffer(b.stored_buffer(xv)).centered && (x[1] % 4 != 0 || !centerable(c->x))) {
    return false;
  }
  const int xi = centered_input(b, xv, c->x);
  const int64_t stored_c = b.buffer(xi).shape[1];
  if (stored_c % 4 != 0) {
    return unavailable_error(fmt::format(
        "cuda target: {}: int8 convolutions need a multiple of 4 input channels (it has {}); "
        "quantize the input with a QuantizeLinear, which pads it",
        node.describe(), stored_c));
  }
  const bool s2d = is_s2d(b.buffer(xi), x);
  // stem_of's f16 input
  ConvProblem p = conv_problem(*c, x, y, stored_c, b.buffer(xi).dtype == DType::kF16, s2d);
  // The plan, with the residual Add fused when an engine takes it (s8 input), else alone; an f16
  // input's with an s8 output when an engine writes one, else f16 rounded by a step after.
  std::optional<IntAdd> sum = p.half ? std::nullopt : fusable_add(b, node);
  std::shared_ptr<ConvPlan> plan;
  int gemm_config = -1;  // the own kernel's tile configuration, when it runs
  std::optional<Int8Gemm> gemm;
  if (p.half) {
    KILN_ASSIGN_OR_RETURN(plan, choose_half_plan(b, p, c->y));
  } else if (s2d) {
    // The s8 space-to-depth stem (lower_quantize wrote it so for the own kernel).
    std::tie(p.lo, p.hi) = centered_bounds(c->y, false);
    gemm = gemm_problem(p);
    KILN_ASSIGN_OR_RETURN(gemm_config, s2d_stem_config(b, node, x));
    if (!gemm) gemm_config = -1;
  } else {
    // The own kernel (every residual and clamp) or cuDNN, whichever is faster.
    p.residual = sum.has_value();
    if (sum) p.residual_scale = sum->in[1].scale / sum->out.scale;
    std::tie(p.lo, p.hi) =
        sum ? centered_bounds(sum->out, sum->relu != nullptr) : centered_bounds(c->y, false);
    gemm = gemm_problem(p);
    if (gemm) {
      KILN_ASSIGN_OR_RETURN(KernelChoice choice, choose_kernel(b, p, *gemm));
      gemm_config = choice.config;
      plan = std::move(choice.plan);
    }
  }
  for (int fused = sum ? 1 : 0; !p.half && !s2d && gemm_config < 0 && fused >= 0 && plan == nullptr;
       --fused) {
    p.residual = fused == 1;
    if (p.residual) p.residual_scale = sum->in[1].scale / sum->out.scale;
    std::tie(p.lo, p.hi) =
        p.residual ? centered_bounds(sum->out, sum->relu != nullptr) : centered_bounds(c->y, false);
    KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p));
    if (plan == nullptr && p.lo < 0) {
      // No engine takes a negative lower clip: the output's s8 saturation alone (values below
      // the zero point's floor then stay unclipped, closer to the float model than ONNX's).
      p.lo = -128;
      p.hi = 127;
      KILN_ASSIGN_OR_RETURN(plan, choose_plan(b, p));
    }
  }
  if (plan == nullptr && gemm_config < 0) {
    return unavailable_error(fmt::format(
        "cuda target: {}: cuDNN has no int8 engine for this convolution ({}); run it on the cpu "
        "target or as a float model",
        node.describe(), p.key()));
  }
  if (!p.residual) sum.reset();  // the Add runs on its own (lower_int_add)
  // Per channel: acc * x_scale * w_scale[k] / out_scale + bias[k] (in the same units), divided
  // by the residual's scale when fused.
  const float factor = sum ? sum->in[0].scale / sum->out.scale / p.residual_scale : 1.0f;
  std::vector<float> scale(static_cast<size_t>(p.k));
  std::vector<float> bias(static_cast<size_t>(p.k), 0.0f);
  for (int64_t k = 0; k < p.k; ++k) {
    const double ws = c->w_scales[c->w_scales.size() == 1 ? 0 : static_cast<size_t>(k)];
    const double s = static_cast<double>(c->x.scale) * ws / c->y.scale;
    scale[static_cast<size_t>(k)] = static_cast<float>(s * factor);
    if (c->bias != nullptr) {
      bias[static_cast<size_t>(k)] =
          static_cast<float>(static_cast<double>(c->bias->data<int32_t>()[k]) * s * factor);
    }
  }
  const QParams out = sum ? sum->out : c->y;
  const int zi = sum ? centered_input(b, sum->dq[1]->input(0), sum->in[1]) : -1;  // K % 4 == 0
  const int ri = sum && gemm_config < 0
                     ? b.constant(std::vector<float>(static_cast<size_t>(p.k), p.residual_scale))
                     : -1;
  if (plan != nullptr) b.need_workspace(plan->workspace);
  std::vector<uint8_t> w_bytes = s2d ? s2d_filter(*c, x[1], p) : nhwc_bytes(*c->w, p.c);
  if (p.half) {
    // The s8 filter as f16 integers (exact).
    std::vector<uint8_t> wide(w_bytes.size() * 2);
    for (size_t i = 0; i < w_bytes.size(); ++i) {
      const uint16_t h = Half(static_cast<float>(static_cast<int8_t>(w_bytes[i]))).bits;
      std::memcpy(wide.data() + 2 * i, &h, 2);
    }
    w_bytes = std::move(wide);
  }
  const int wi = b.constant_bytes(p.half ? DType::kF16 : DType::kI8, Shape{p.k, p.c, p.r, p.s},
                                  std::move(w_bytes));
  const int si = b.constant(std::move(scale));
  const int bi = b.constant(std::move(bias));
  const Value* yv = sum ? sum->q->output(0) : node.output(0);
  const Out o = define_output(b, yv, p.k);
  // The convolution writes `o.centered`, or an f16 scratch buffer that a step rounds into it.
  int yi = o.centered;
  if (p.half_out) {
    Buffer buf;
    buf.dtype = DType::kF16;
    buf.shape = Shape{p.n, p.k, p.oh, p.ow};
    buf.nhwc = true;
    buf.bytes = p.y_bytes();
    yi = b.define_buffer(nullptr, std::move(buf));
  }
  std::vector<int> reads = {xi, wi, si, bi};
  if (zi >= 0) reads.push_back(zi);
  if (ri >= 0) reads.push_back(ri);
  std::string kind =
      sum      ? (sum->relu != nullptr ? "QLinearConv+Add+Relu int8" : "QLinearConv+Add int8")
      : p.half ? "QLinearConv f16 int8"
               : "QLinearConv int8";
  // The step's operands in this session's arena.
  auto args = [=](Session& s) {
    ConvArgs a;
    a.x = ptr(s, xi);
    a.w = ptr(s, wi);
    a.scale = ptr(s, si);
    a.bias = ptr(s, bi);
    a.z = zi >= 0 ? ptr(s, zi) : nullptr;
    a.y = ptr(s, yi);
    return a;
  };
  if (gemm_config >= 0) {
    kind = s2d ? "QLinearConv stem int8 gemm" : kind + " gemm";
    const Int8Gemm g = *gemm;
    add(b, node, std::move(kind), reads, {yi},
        [=](Session& s) { return run_gemm(gemm_config, g, args(s), s.stream); });
  } else {
    add(b, node, std::move(kind), reads, {yi}, [=](Session& s) {
      ConvArgs a = args(s);
      a.rescale = ri >= 0 ? ptr(s, ri) : nullptr;
      a.workspace = s.workspace;
      KILN_RETURN_IF_ERROR(check_cudnn(cudnnSetStream(s.cudnn, s.stream), "cudnnSetStream"));
      return execute(s.cudnn, *plan, a);
    });
  }
  if (p.half_out) {
    const auto [lo, hi] = centered_bounds(c->y, false);
    Int8Layout l;
    l.n = p.n;
    l.c = p.k;
    l.s = p.oh * p.ow;
    l.stored_c = p.k;
    l.nhwc = true;
    const int from = yi;
    const int to = o.centered;
    add(b, node, "Round f16 int8", {from}, {to}, [=, lo = lo, hi = hi](Session& s) {
      return launch_quantize8(Elem::kF16, ptr(s, from), l, ptr(s, to), l, false, 1.0f, 0, lo, hi,
                              s.stream);
    });
  }
  finish_output(b, o, yv, out);
  if (sum) {
    for (const Node* n : {sum->dq[0], sum->dq[1], sum->add, sum->relu, sum->q}) {
      if (n != nullptr) b.mark_fused(n);
    }
    b.mark_fused(sole_reader(b, node.output(0)));
  }
  return true;
}

}  // namespace

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
    default: return false;
  }
}

}  // namespace kiln::compiler::cuda
