// SPDX-License-Identifier: Apache-2.0
// QDQ fusion: DequantizeLinear -> Conv/MatMul (-> Relu) -> QuantizeLinear regions, as PyTorch FX
// quantization and ONNX Runtime's QDQ format write them, become QLinearConv / QLinearMatMul on the
// integer tensors; Q/DQ pairs around ops that commute with quantization are elided.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/infer.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

bool is_8bit(DType d) {
  return d == DType::kU8 || d == DType::kI8;
}

const Tensor* constant_of(const Node& node, int input) {
  return node.has_input(input) ? node.input(input)->constant_value() : nullptr;
}

// The only node using `v` (not returned by the graph), or nullptr.
Node* sole_user(const Value* v) {
  if (v->uses().size() != 1 || is_graph_output(v)) return nullptr;
  return v->uses()[0].node;
}

// Per-tensor quantization parameters of a QuantizeLinear or DequantizeLinear node: a constant
// scalar f32 scale and a constant scalar zero point (absent: 0 of the node's 8-bit type).
struct TensorParams {
  float scale = 0.0f;
  int64_t zero_point = 0;
  DType qtype = DType::kU8;
};

std::optional<TensorParams> tensor_params(const Node& node) {
  const Tensor* scale = constant_of(node, 1);
  if (scale == nullptr || scale->dtype() != DType::kF32 || scale->numel() != 1) return std::nullopt;
  TensorParams p;
  p.scale = scale->data<float>()[0];
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) return std::nullopt;
  const Value* q = node.kind() == OpKind::kQuantizeLinear ? node.output(0) : node.input(0);
  if (!q->type().is_tensor() || !is_8bit(q->tensor_type().dtype)) return std::nullopt;
  p.qtype = q->tensor_type().dtype;
  if (node.has_input(2)) {
    const Tensor* zp = constant_of(node, 2);
    if (zp == nullptr || zp->numel() != 1 || zp->dtype() != p.qtype) return std::nullopt;
    p.zero_point = p.qtype == DType::kU8 ? zp->data<uint8_t>()[0] : zp->data<int8_t>()[0];
  }
  return p;
}

// The 8-bit tensor a DequantizeLinear with per-tensor parameters reads, when `v` is its output.
const Node* dequantize_of(const Value* v) {
  const Node* dq = v->producer();
  if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear || dq->graph() != v->graph()) {
    return nullptr;
  }
  return tensor_params(*dq) ? dq : nullptr;
}

// A weight DequantizeLinear: a constant 8-bit tensor, a constant scale (one value, or one per
// slice along `axis`) and an optional constant zero point of the same shape.
struct WeightParams {
  const Node* dq = nullptr;
  const Tensor* weights = nullptr;
  std::vector<float> scales;  // one value, or one per slice along the axis
  int64_t axis = 0;
};

std::optional<WeightParams> weight_params(const Value* v) {
  const Node* dq = v->producer();
  if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear) return std::nullopt;
  WeightParams p;
  p.dq = dq;
  p.weights = constant_of(*dq, 0);
  const Tensor* scale = constant_of(*dq, 1);
  if (p.weights == nullptr || !is_8bit(p.weights->dtype()) || scale == nullptr ||
      scale->dtype() != DType::kF32 || p.weights->shape().rank() < 1) {
    return std::nullopt;
  }
  p.axis = dq->attrs<ops::DequantizeLinear>().axis;
  if (p.axis < 0) p.axis += p.weights->shape().rank();
  if (scale->numel() != 1 && (scale->shape().rank() != 1 || p.axis >= p.weights->shape().rank() ||
                              scale->numel() != p.weights->shape()[static_cast<int>(p.axis)])) {
    return std::nullopt;
  }
  for (float s : scale->span<float>()) {
    if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
    p.scales.push_back(s);
  }
  if (dq->has_input(2)) {
    const Tensor* zp = constant_of(*dq, 2);
    if (zp == nullptr || zp->dtype() != p.weights->dtype() || zp->numel() != scale->numel()) {
      return std::nullopt;
    }
  }
  return p;
}

// The node's zero-point input `i`, or a new constant 0 of `dtype` shaped like `like` (a scalar
// when `like` is null).
Value* zero_point_or_zero(Graph& graph, const Node& node, int i, DType dtype, const Tensor* like,
                          Node* before) {
  if (node.has_input(i)) return node.input(i);
  Shape shape = like != nullptr ? like->shape() : Shape{};
  Tensor zero = Tensor::allocate(dtype, shape).value();
  std::memset(zero.raw_data(), 0, zero.nbytes());
  return graph.add_constant(std::move(zero), graph.unique_name(node.name() + "_zero_point"),
                            before);
}

// The bias of a Conv as int32 in units of x_scale * w_scale[c]: an f32 constant quantized, or a
// DequantizeLinear of an int32 constant whose scale is that product (taken as it is).
std::optional<Tensor> integer_bias(const Value* bias, float x_scale,
                                   const std::vector<float>& w_scales, int64_t channels) {
  auto scale_of = [&](int64_t c) {
    return x_scale * w_scales[w_scales.size() == 1 ? 0 : static_cast<size_t>(c)];
  };
  std::vector<float> values;
  if (const Node* dq = bias->producer(); dq != nullptr && dq->kind() == OpKind::kDequantizeLinear) {
    const Tensor* q = constant_of(*dq, 0);
    const Tensor* s = constant_of(*dq, 1);
    const Tensor* zp = constant_of(*dq, 2);
    if (q == nullptr || q->dtype() != DType::kI32 || q->numel() != channels || s == nullptr ||
        s->dtype() != DType::kF32 || (s->numel() != 1 && s->numel() != channels)) {
      return std::nullopt;
    }
    bool same = zp == nullptr || zp->dtype() == DType::kI32;
    for (int64_t c = 0; same && c < channels; ++c) {
      const float sc = s->data<float>()[s->numel() == 1 ? 0 : c];
      same = std::abs(sc - scale_of(c)) <= 1e-5f * scale_of(c) &&
             (zp == nullptr || zp->data<int32_t>()[zp->numel() == 1 ? 0 : c] == 0);
    }
    if (same) return *q;
    return std::nullopt;
  }
  const Tensor* b = bias->constant_value();
  if (b == nullptr || b->dtype() != DType::kF32 || b->numel() != channels) return std::nullopt;
  std::vector<int32_t> q(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double v = std::nearbyint(static_cast<double>(b->data<float>()[c]) / scale_of(c));
    if (std::abs(v) > 2147483647.0) return std::nullopt;
    q[static_cast<size_t>(c)] = static_cast<int32_t>(v);
  }
  return Tensor::from_vector<int32_t>(q);
}

// Q(Relu(y)) equals Q(y) when the quantized zero point is the lowest value of its type (the
// saturation does the Relu).
bool relu_is_saturation(const TensorParams& y) {
  return y.zero_point == (y.qtype == DType::kU8 ? 0 : -128);
}

// ONNX QuantizeLinear of one value: saturate(round_half_even(v / scale) + zero_point).
int64_t quantize_value(const TensorParams& p, float v) {
  const int64_t lo = p.qtype == DType::kU8 ? 0 : -128;
  const int64_t hi = p.qtype == DType::kU8 ? 255 : 127;
  const float q = std::nearbyint(v / p.scale) + static_cast<float>(p.zero_point);
  return q <= static_cast<float>(lo)   ? lo
         : q >= static_cast<float>(hi) ? hi
                                       : static_cast<int64_t>(q);
}

// Q(Clip(y, lo, hi)) equals Q(y) for every y when Q(lo) is the lowest value of the quantized type
// and Q(hi) the highest (Q is monotonic, so every y below lo or above hi saturates the same way);
// a bound that is absent is infinite and always holds. ReLU6 exports as Clip(0, 6), and an
// observer that saw values in [0, 6] gives it such a range.
bool clip_is_saturation(const Node& clip, const TensorParams& y) {
  if (clip.num_inputs() < 1) return false;
  for (int i = 1; i <= 2; ++i) {
    if (!clip.has_input(i)) continue;
    const Tensor* bound = constant_of(clip, i);
    if (bound == nullptr || bound->dtype() != DType::kF32 || bound->numel() != 1) return false;
    const int64_t want =
        i == 1 ? (y.qtype == DType::kU8 ? 0 : -128) : (y.qtype == DType::kU8 ? 255 : 127);
    if (quantize_value(y, bound->data<float>()[0]) != want) return false;
  }
  return true;
}

// Q(Relu(y)) equals Relu(Q(y)), a Relu on the 8-bit values, when the zero point is 0 of int8
// (symmetric activations, which the cuda target's int8 kernels take: kiln's own calibration for
// cuda, TensorRT-style models): a ReLU clamps the values below the zero point to it.
bool relu_is_int8_floor(const TensorParams& y) {
  return y.zero_point == 0 && y.qtype == DType::kI8;
}

// Q(Clip(y, 0, hi)) equals Relu(Q(y)) under relu_is_int8_floor when Q(hi) saturates (ReLU6 with
// a range calibrated to [-6, 6] or narrower).
bool clip_is_int8_floor(const Node& clip, const TensorParams& y) {
  if (!relu_is_int8_floor(y) || !clip.has_input(1)) return false;
  const Tensor* lo = constant_of(clip, 1);
  if (lo == nullptr || lo->dtype() != DType::kF32 || lo->numel() != 1 ||
      lo->data<float>()[0] != 0.0f) {
    return false;
  }
  if (!clip.has_input(2)) return true;
  const Tensor* hi = constant_of(clip, 2);
  return hi != nullptr && hi->dtype() == DType::kF32 && hi->numel() == 1 &&
         quantize_value(y, hi->data<float>()[0]) == 127;
}

// The value the QuantizeLinear `q` quantizes, looking through a Relu or Clip its saturation does
// or that a Relu on the 8-bit values does (then sets `int_relu`: the fused node's output needs
// with_int_relu).
Value* quantized_source(const Node& q, const TensorParams& yp, bool& int_relu) {
  Value* y = q.input(0);
  int_relu = false;
  Node* p = y->producer();
  if (p == nullptr || sole_user(y) != &q) return y;
  if ((p->kind() == OpKind::kRelu && relu_is_saturation(yp)) ||
      (p->kind() == OpKind::kClip && clip_is_saturation(*p, yp))) {
    return p->input(0);
  }
  if ((p->kind() == OpKind::kRelu && relu_is_int8_floor(yp)) ||
      (p->kind() == OpKind::kClip && clip_is_int8_floor(*p, yp))) {
    int_relu = true;
    return p->input(0);
  }
  return y;
}

// The Conv output y when `z` is y * Sigmoid(y) (either order) and nothing else reads y or the
// Sigmoid; nullptr otherwise.
Value* silu_source(const Value* z) {
  Node* mul = z->producer();
  if (mul == nullptr || mul->kind() != OpKind::kMul || mul->num_inputs() != 2) return nullptr;
  for (int i = 0; i < 2; ++i) {
    Value* y = mul->input(i);
    const Node* sigmoid = mul->input(1 - i)->producer();
    if (sigmoid != nullptr && sigmoid->kind() == OpKind::kSigmoid && sigmoid->input(0) == y &&
        sole_user(sigmoid->output(0)) == mul && y->uses().size() == 2 && !is_graph_output(y) &&
        y->producer() != nullptr && y->producer()->kind() == OpKind::kConv) {
      return y;
    }
  }
  return nullptr;
}

// `out` (a fused node's 8-bit output), through a Relu on its values when `int_relu`.
Result<Value*> with_int_relu(Graph& graph, Node* q, Value* out, bool int_relu,
                             const std::string& name) {
  if (!int_relu) return out;
  Node* relu = graph.add_node(Op(ops::Relu{}), {out}, 1, name + "_relu", q);
  relu->output(0)->set_name(graph.unique_name(name + "_relu_q"));
  KILN_RETURN_IF_ERROR(infer_node(*relu));
  return relu->output(0);
}

Value* finish(Graph& graph, Node* q, Op op, std::vector<Value*> inputs, const std::string& name) {
  Node* n = graph.add_node(std::move(op), std::move(inputs), 1, name, q);
  n->output(0)->set_name(graph.unique_name(name + "_q"));
  return n->output(0);
}

// Q(Conv(DQ(x), DQ(w), bias)) (a Relu before the Q absorbed)  ==>  QLinearConv; with
// `silu_convs`, Q(SiLU(Conv(...)))  ==>  QLinearConv[activation = "SiLU"].
Result<bool> fuse_conv(Graph& graph, Node* q, bool grouped_convs,
                       const std::function<bool(const Node&)>& silu_convs) {
  if (q->kind() != OpKind::kQuantizeLinear) return false;
  std::optional<TensorParams> yp = tensor_params(*q);
  if (!yp) return false;
  bool int_relu = false;
  Value* y = quantized_source(*q, *yp, int_relu);
  bool silu = false;
  if (silu_convs && y == q->input(0) && sole_user(y) == q) {
    if (Value* s = silu_source(y); s != nullptr && silu_convs(*s->producer())) {
      y = s;
      silu = true;
    }
  }
  Node* conv = y->producer();
  if (conv == nullptr || conv->kind() != OpKind::kConv || conv->graph() != &graph) return false;
  if (!silu && sole_user(y) == nullptr) return false;
  const auto& attrs = conv->attrs<ops::Conv>();
  if (attrs.group != 1 && !grouped_convs) {
    // Depthwise ones still fuse (group = input channels = filters, one input channel a filter).
    const Value* wv = conv->input(1);
    const bool depthwise = wv->type().is_tensor() && wv->tensor_type().is_static() &&
                           wv->tensor_type().shape().rank() == 4 &&
                           wv->tensor_type().shape()[0] == attrs.group &&
                           wv->tensor_type().shape()[1] == 1;
    if (!depthwise) return false;
  }
  if (attrs.activation) {
    if (*attrs.activation != "Relu" || int_relu || silu) return false;
    if (!relu_is_saturation(*yp)) {
      if (!relu_is_int8_floor(*yp)) return false;
      int_relu = true;
    }
  }
  const Node* dqx = dequantize_of(conv->input(0));
  std::optional<WeightParams> w = conv->has_input(1) ? weight_params(conv->input(1)) : std::nullopt;
  if (dqx == nullptr || !w || (w->scales.size() != 1 && w->axis != 0)) return false;
  const TensorParams xp = *tensor_params(*dqx);
  const int64_t channels = w->weights->shape()[0];
  Value* bias = nullptr;
  if (conv->has_input(2)) {
    std::optional<Tensor> b = integer_bias(conv->input(2), xp.scale, w->scales, channels);
    if (!b) return false;
    bias = graph.add_constant(std::move(*b), graph.unique_name(conv->name() + "_bias_i32"), q);
  }
  ops::QLinearConv op;
  op.auto_pad = attrs.auto_pad;
  op.dilations = attrs.dilations;
  op.group = attrs.group;
  op.kernel_shape = attrs.kernel_shape;
  op.pads = attrs.pads;
  op.strides = attrs.strides;
  if (silu) op.activation = "SiLU";
  std::vector<Value*> inputs = {
      dqx->input(0),
      dqx->input(1),
      zero_point_or_zero(graph, *dqx, 2, xp.qtype, nullptr, q),
      w->dq->input(0),
      w->dq->input(1),
      zero_point_or_zero(graph, *w->dq, 2, w->weights->dtype(), constant_of(*w->dq, 1), q),
      q->input(1),
      zero_point_or_zero(graph, *q, 2, yp->qtype, nullptr, q),
      bias};
  if (bias == nullptr) inputs.pop_back();
  Value* out = finish(graph, q, Op(std::move(op)), std::move(inputs), conv->name());
  KILN_RETURN_IF_ERROR(infer_node(*out->producer()));
  KILN_ASSIGN_OR_RETURN(out, with_int_relu(graph, q, out, int_relu, conv->name()));
  return replace_node(graph, q, out);
}

// Q(MatMul(DQ(a), DQ(b))) with per-tensor a and b per-tensor or per column  ==>  QLinearMatMul.
Result<bool> fuse_matmul(Graph& graph, Node* q) {
  if (q->kind() != OpKind::kQuantizeLinear) return false;
  std::optional<TensorParams> yp = tensor_params(*q);
  if (!yp) return false;
  bool int_relu = false;
  Value* y = quantized_source(*q, *yp, int_relu);
  Node* mm = y->producer();
  if (mm == nullptr || mm->kind() != OpKind::kMatMul || mm->graph() != &graph ||
      sole_user(y) == nullptr) {
    return false;
  }
  const Node* dqa = dequantize_of(mm->input(0));
  if (dqa == nullptr) return false;
  const Node* dqb = dequantize_of(mm->input(1));
  std::optional<WeightParams> w;
  if (dqb == nullptr) {
    w = weight_params(mm->input(1));
    if (!w || w->weights->shape().rank() != 2 || (w->scales.size() != 1 && w->axis != 1)) {
      return false;
    }
    dqb = w->dq;
  }
  const DType bt = dqb->input(0)->tensor_type().dtype;
  const Tensor* b_scale = constant_of(*dqb, 1);
  std::vector<Value*> inputs = {
      dqa->input(0),
      dqa->input(1),
      zero_point_or_zero(graph, *dqa, 2, tensor_params(*dqa)->qtype, nullptr, q),
      dqb->input(0),
      dqb->input(1),
      zero_point_or_zero(graph, *dqb, 2, bt, b_scale, q),
      q->input(1),
      zero_point_or_zero(graph, *q, 2, yp->qtype, nullptr, q)};
  Value* out = finish(graph, q, Op(ops::QLinearMatMul{}), std::move(inputs), mm->name());
  KILN_RETURN_IF_ERROR(infer_node(*out->producer()));
  KILN_ASSIGN_OR_RETURN(out, with_int_relu(graph, q, out, int_relu, mm->name()));
  return replace_node(graph, q, out);
}

// The weights of a Linear as torch exports it, MatMul(x, Transpose(DQ(w[N, K]))), or of a
// MatMul(x, DQ(w[K, N])): constant 8-bit [N, K] weights with per-tensor or per-N scales and
// zero points, as a QLinearConv's weights want them.
struct LinearWeights {
  Tensor weights;  // [N, K, 1, 1]
  Tensor scales;   // [1] or [N]
  Tensor zero_points;
};

// `b` is the MatMul's right input (a Transpose of the weights or the weights), or a Gemm's B
// (`gemm_trans_b`: whether the Gemm transposes it).
std::optional<LinearWeights> linear_weights(const Value* b, std::optional<bool> gemm_trans_b) {
  bool transposed = gemm_trans_b.value_or(false);
  if (const Node* t = b->producer();
      !gemm_trans_b && t != nullptr && t->kind() == OpKind::kTranspose) {
    const auto& perm = t->attrs<ops::Transpose>().perm;
    if (perm && *perm != std::vector<int64_t>{1, 0}) return std::nullopt;
    if (sole_user(b) == nullptr) return std::nullopt;
    b = t->input(0);
    transposed = true;
  }
  std::optional<WeightParams> w = weight_params(b);
  if (!w || w->weights->shape().rank() != 2) return std::nullopt;
  // Per-N scales: axis 0 of [N, K] (transposed), axis 1 of [K, N] (not transposed).
  if (w->scales.size() != 1 && w->axis != (transposed ? 0 : 1)) return std::nullopt;
  const int64_t n = w->weights->shape()[transposed ? 0 : 1];
  const int64_t k = w->weights->shape()[transposed ? 1 : 0];
  const DType dt = w->weights->dtype();
  LinearWeights out;
  out.weights = Tensor::allocate(dt, Shape{n, k, 1, 1}).value();
  const auto* src = static_cast<const uint8_t*>(w->weights->raw_data());
  auto* dst = static_cast<uint8_t*>(out.weights.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) dst[i * k + j] = src[transposed ? i * k + j : j * n + i];
  }
  out.scales = *constant_of(*w->dq, 1);
  if (w->dq->has_input(2)) {
    out.zero_points = *constant_of(*w->dq, 2);
  } else {
    out.zero_points = Tensor::allocate(dt, out.scales.shape()).value();
    std::memset(out.zero_points.raw_data(), 0, out.zero_points.nbytes());
  }
  return out;
}

// A Linear with its bias, Q(Add(MatMul(DQ(x), Transpose(DQ(w))), bias)) or
// Q(Gemm(DQ(x), DQ(w), bias)) (alpha = beta = 1, A not transposed), or one whose weights need
// transposing  ==>  Reshape(QLinearConv(Reshape(x, [M, K, 1, 1]), w[N, K, 1, 1], bias),
// [..., N]): a 1x1 integer convolution is the matmul with an int32 bias in its accumulator, as
// standard ONNX that every target runs.
Result<bool> fuse_linear(Graph& graph, Node* q) {
  if (q->kind() != OpKind::kQuantizeLinear) return false;
  std::optional<TensorParams> yp = tensor_params(*q);
  if (!yp) return false;
  bool int_relu = false;
  Value* y = quantized_source(*q, *yp, int_relu);
  Node* add = y->producer();
  if (add == nullptr || add->graph() != &graph || sole_user(y) == nullptr) return false;
  Node* mm = add;
  Value* bias = nullptr;
  std::optional<bool> gemm_trans_b;
  if (add->kind() == OpKind::kGemm) {
    const auto& g = add->attrs<ops::Gemm>();
    if (g.alpha != 1.0f || g.beta != 1.0f || g.transA != 0) return false;
    gemm_trans_b = g.transB != 0;
    if (add->has_input(2)) bias = add->input(2);
  } else if (add->kind() == OpKind::kAdd) {
    for (int i = 0; i < 2 && bias == nullptr; ++i) {
      Node* p = add->input(i)->producer();
      if (p != nullptr && p->kind() == OpKind::kMatMul && sole_user(add->input(i)) == add) {
        mm = p;
        bias = add->input(1 - i);
      }
    }
    if (bias == nullptr) return false;
  }
  if (mm->kind() != OpKind::kMatMul && mm->kind() != OpKind::kGemm) return false;
  // Without a bias, a MatMul on untransposed weights is fuse_matmul's.
  if (!gemm_trans_b && bias == nullptr && mm->input(1)->producer() != nullptr &&
      mm->input(1)->producer()->kind() != OpKind::kTranspose) {
    return false;
  }
  const Node* dqa = dequantize_of(mm->input(0));
  if (dqa == nullptr) return false;
  const Value* a = dqa->input(0);
  if (!a->type().is_tensor() || !a->tensor_type().is_static()) return false;
  const Shape& as = a->tensor_type().shape();
  if (as.rank() < 2) return false;
  std::optional<LinearWeights> w = linear_weights(mm->input(1), gemm_trans_b);
  if (!w) return false;
  const int64_t n = w->weights.shape()[0];
  const int64_t k = w->weights.shape()[1];
  if (as[as.rank() - 1] != k) return false;
  const TensorParams ap = *tensor_params(*dqa);
  std::vector<float> w_scales(w->scales.span<float>().begin(), w->scales.span<float>().end());
  Value* bias_i32 = nullptr;
  if (bias != nullptr) {
    const Value* b = bias;
    if (!b->type().is_tensor() || !b->tensor_type().is_static() ||
        b->tensor_type().shape().rank() != 1) {
      return false;
    }
    std::optional<Tensor> bq = integer_bias(b, ap.scale, w_scales, n);
    if (!bq) return false;
    bias_i32 = graph.add_constant(std::move(*bq), graph.unique_name(mm->name() + "_bias_i32"), q);
  }
  const int64_t m = as.numel() / k;
  std::vector<int64_t> out_shape(as.begin(), as.end());
  out_shape.back() = n;
  Value* to_4d = graph.add_constant(Tensor::from_vector<int64_t>({m, k, 1, 1}),
                                    graph.unique_name(mm->name() + "_shape4d"), q);
  Value* back = graph.add_constant(Tensor::from_vector<int64_t>(out_shape),
                                   graph.unique_name(mm->name() + "_shape"), q);
  Node* r = graph.add_node(Op(ops::Reshape{}), {dqa->input(0), to_4d}, 1, mm->name() + "_x4d", q);
  r->output(0)->set_name(graph.unique_name(mm->name() + "_x4d"));
  KILN_RETURN_IF_ERROR(infer_node(*r));
  std::vector<Value*> inputs = {
      r->output(0),
      dqa->input(1),
      zero_point_or_zero(graph, *dqa, 2, ap.qtype, nullptr, q),
      graph.add_constant(std::move(w->weights), graph.unique_name(mm->name() + "_w"), q),
      graph.add_constant(std::move(w->scales), graph.unique_name(mm->name() + "_w_scale"), q),
      graph.add_constant(std::move(w->zero_points), graph.unique_name(mm->name() + "_w_zero"), q),
      q->input(1),
      zero_point_or_zero(graph, *q, 2, yp->qtype, nullptr, q)};
  if (bias_i32 != nullptr) inputs.push_back(bias_i32);
  Value* conv = finish(graph, q, Op(ops::QLinearConv{}), std::move(inputs), mm->name());
  KILN_RETURN_IF_ERROR(infer_node(*conv->producer()));
  Node* out = graph.add_node(Op(ops::Reshape{}), {conv, back}, 1, mm->name() + "_y", q);
  out->output(0)->set_name(graph.unique_name(mm->name() + "_y_q"));
  KILN_RETURN_IF_ERROR(infer_node(*out));
  KILN_ASSIGN_OR_RETURN(Value* y_out, with_int_relu(graph, q, out->output(0), int_relu, mm->name()));
  return replace_node(graph, q, y_out);
}

bool same_params(const TensorParams& a, const TensorParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point && a.qtype == b.qtype;
}

// Q(DQ(x)) with equal parameters is x; so is Q(op(DQ(x))) = op(x) for ops that only move or
// select elements (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity), and with
// `max_pools` for MaxPool: Q is monotonic, so the maximum of the quantized window is the quantized
// maximum.
Result<bool> elide_pair(Graph& graph, Node* q, bool max_pools) {
  if (q->kind() != OpKind::kQuantizeLinear) return false;
  std::optional<TensorParams> yp = tensor_params(*q);
  if (!yp) return false;
  Value* v = q->input(0);
  Node* op = v->producer();
  if (op == nullptr || op->graph() != &graph) return false;
  if (const Node* dq = dequantize_of(v)) {
    if (!same_params(*tensor_params(*dq), *yp)) return false;
    return replace_node(graph, q, dq->input(0));
  }
  switch (op->kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kTranspose:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: break;
    case OpKind::kMaxPool:
      if (!max_pools) return false;
      if (op->num_outputs() > 1 &&
          (!op->output(1)->uses().empty() || is_graph_output(op->output(1)))) {
        return false;  // its indices are read
      }
      break;
    default: return false;
  }
  if (sole_user(v) != q || op->num_inputs() < 1) return false;
  const Node* dq = dequantize_of(op->input(0));
  if (dq == nullptr || !same_params(*tensor_params(*dq), *yp)) return false;
  std::vector<Value*> inputs = op->inputs();
  inputs[0] = dq->input(0);
  Node* moved = graph.add_node(op->op(), std::move(inputs), 1, op->name(), q);
  moved->output(0)->set_name(graph.unique_name(op->name() + "_q"));
  KILN_RETURN_IF_ERROR(infer_node(*moved));
  return replace_node(graph, q, moved->output(0));
}

// Q(Clip(DQ(x), lo, hi)) or Q(Relu(DQ(x))) with equal parameters is Clip(x, Q(lo), Q(hi)) on the
// 8-bit data (exactly: DQ then Q is the identity on x, and Q is monotonic), or x itself when
// Q(lo) and Q(hi) are the type's limits. FX exports ReLU6 this way, sharing its input's
// parameters.
Result<bool> clip_in_integers(Graph& graph, Node* q) {
  if (q->kind() != OpKind::kQuantizeLinear) return false;
  std::optional<TensorParams> yp = tensor_params(*q);
  if (!yp) return false;
  Value* v = q->input(0);
  Node* op = v->producer();
  if (op == nullptr || op->graph() != &graph || sole_user(v) != q ||
      (op->kind() != OpKind::kClip && op->kind() != OpKind::kRelu)) {
    return false;
  }
  const Node* dq = dequantize_of(op->input(0));
  if (dq == nullptr || !same_params(*tensor_params(*dq), *yp)) return false;
  const int64_t qmin = yp->qtype == DType::kU8 ? 0 : -128;
  const int64_t qmax = yp->qtype == DType::kU8 ? 255 : 127;
  int64_t bounds[2] = {qmin, qmax};
  for (int i = 1; i <= 2; ++i) {
    const bool relu_floor = op->kind() == OpKind::kRelu && i == 1;
    if (!relu_floor && (op->kind() == OpKind::kRelu || !op->has_input(i))) continue;
    float bound = 0.0f;
    if (!relu_floor) {
      const Tensor* t = constant_of(*op, i);
      if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != 1) return false;
      bound = t->data<float>()[0];
    }
    bounds[i - 1] = quantize_value(*yp, bound);
  }
  if (bounds[0] == qmin && bounds[1] == qmax) return replace_node(graph, q, dq->input(0));
  auto scalar = [&](int64_t b) {
    Tensor t = Tensor::allocate(yp->qtype, Shape{}).value();
    if (yp->qtype == DType::kU8) {
      t.data<uint8_t>()[0] = static_cast<uint8_t>(b);
    } else {
      t.data<int8_t>()[0] = static_cast<int8_t>(b);
    }
    return graph.add_constant(std::move(t), graph.unique_name(op->name() + "_bound"), q);
  };
  Node* clip = graph.add_node(Op(ops::Clip{}), {dq->input(0), scalar(bounds[0]), scalar(bounds[1])},
                              1, op->name(), q);
  clip->output(0)->set_name(graph.unique_name(op->name() + "_q"));
  KILN_RETURN_IF_ERROR(infer_node(*clip));
  return replace_node(graph, q, clip->output(0));
}

class QdqFusion final : public Pass {
 public:
  QdqFusion(bool max_pools, bool grouped_convs, std::function<bool(const Node&)> silu_convs)
      : max_pools_(max_pools), grouped_convs_(grouped_convs), silu_convs_(std::move(silu_convs)) {}
  std::string_view name() const override { return "qdq_fusion"; }
  Result<bool> run(Graph& graph) override {
    const bool max_pools = max_pools_;
    const bool grouped = grouped_convs_;
    auto elide = [max_pools](Graph& g, Node* q) { return elide_pair(g, q, max_pools); };
    auto conv = [grouped, this](Graph& g, Node* q) {
      return fuse_conv(g, q, grouped, silu_convs_);
    };
    return rewrite_to_fixpoint(graph, {conv, fuse_matmul, fuse_linear, elide, clip_in_integers});
  }

 private:
  bool max_pools_;
  bool grouped_convs_;
  std::function<bool(const Node&)> silu_convs_;
};

}  // namespace

std::unique_ptr<Pass> make_qdq_fusion(bool max_pools, bool grouped_convs,
                                      std::function<bool(const Node&)> silu_convs) {
  return std::make_unique<QdqFusion>(max_pools, grouped_convs, std::move(silu_convs));
}

}  // namespace kiln::compiler
