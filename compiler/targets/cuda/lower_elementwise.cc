// SPDX-License-Identifier: Apache-2.0
// Lowering elementwise ops to the elementwise kernels (kernels/elementwise.h): unary and binary
// ops (broadcasting, in their operands' layout), squeeze-and-excitation's channel scaling, Cast,
// and the transformer patterns: ops between the Cast pair of the fp16/bf16 conversion run in half,
// PyTorch's exact GELU as one step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/elementwise.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "core/env.h"

namespace kiln::compiler::cuda {

namespace {

// Unary `u` from value `in` to value `out` as one step of `node` named `kind`.
bool add_unary(Builder& b, const Node& node, std::string kind,
               std::pair<Unary, std::pair<float, float>> u, const Value* in, const Value* out) {
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  // Elementwise: the output keeps the input's layout.
  const int x = b.stored_buffer(in);
  const int y = b.define(out, b.is_nhwc(in));
  const int64_t n = shape_of(out).numel();
  const Unary op = u.first;
  const float alpha = u.second.first;
  const float beta = u.second.second;
  add(b, node, std::move(kind), {x}, {y}, [=, e = *e](Session& s) {
    return launch_unary(e, op, ptr(s, x), ptr(s, y), n, alpha, beta, s.stream);
  });
  return true;
}

// `node` (a unary op) reading `in` and writing `out` (its own input and output, or the ends of a
// Cast pair around it).
bool lower_unary(Builder& b, const Node& node, const Value* in, const Value* out) {
  auto u = unary_of(node);
  return u && add_unary(b, node, std::string(node.op().name()), *u, in, out);
}

// Squeeze-and-excitation's scaling, Mul(x [N, C, H, W], s [N, C, 1, 1]) in either order: the
// index of x among the Mul's inputs, or -1.
int channel_scale_operand(const Node& mul) {
  if (mul.kind() != OpKind::kMul || mul.num_inputs() != 2) return -1;
  const Shape y = shape_of(mul.output(0));
  if (y.rank() != 4) return -1;
  for (int i = 0; i < 2; ++i) {
    const Shape s = shape_of(mul.input(1 - i));
    if (shape_of(mul.input(i)) == y && s == Shape{y[0], y[1], 1, 1} && y[2] * y[3] > 1) return i;
  }
  return -1;
}

// The scaling of channel_scale_operand's Mul as one step, in x's layout: y = x * s per (image,
// channel), `scale` (the [N, C, 1, 1] operand) through a sigmoid when `sigmoid` (its Sigmoid
// fused).
bool lower_channel_scale(Builder& b, const Node& mul, const Value* scale, bool sigmoid) {
  const int xi = channel_scale_operand(mul);
  if (xi < 0) return false;
  const Value* x = mul.input(xi);
  const std::optional<Elem> e = common_elem({x, scale, mul.output(0)});
  if (!e || !b.has_buffer(x)) return false;
  const Shape y = shape_of(mul.output(0));
  const bool nhwc = b.is_nhwc(x);
  const int a = b.stored_buffer(x);
  const int si = b.stored_buffer(scale);  // [N, C, 1, 1]: the same bytes in either layout
  const int yi = b.define(mul.output(0), nhwc);
  const int64_t hw = y[2] * y[3];
  add(b, mul, sigmoid ? "Sigmoid+ChannelScale" : "ChannelScale", {a, si}, {yi},
      [=, e = *e](Session& s) {
        return launch_channel_scale(e, ptr(s, a), ptr(s, si), ptr(s, yi), y[0], y[1], hw, nhwc,
                                    sigmoid, s.stream);
      });
  return true;
}

}  // namespace

bool lower_unary(Builder& b, const Node& node) {
  // A Sigmoid that alone feeds squeeze-and-excitation's scaling runs inside it.
  if (const Node* mul = b.only_consumer(node.output(0));
      node.kind() == OpKind::kSigmoid && mul != nullptr && channel_scale_operand(*mul) >= 0 &&
      mul->input(1 - channel_scale_operand(*mul)) == node.output(0) &&
      lower_channel_scale(b, *mul, node.input(0), true)) {
    b.mark_fused(mul);
    return true;
  }
  return lower_unary(b, node, node.input(0), node.output(0));
}

namespace {

// Strides per logical output dim of an operand of shape `in`: its plain row-major layout
// (broadcast_strides), or NHWC storage (a 4-D operand: n HWC, c 1, h WC, w C), 0 where it
// broadcasts.
void operand_strides(const Shape& in, const Shape& out, bool nhwc, int64_t* strides) {
  if (!nhwc) {
    broadcast_strides(in, out, strides);
    return;
  }
  const int64_t stored[4] = {in[2] * in[3] * in[1], 1, in[3] * in[1], in[1]};
  for (int d = 0; d < 4; ++d) strides[d] = in[d] == 1 && out[d] != 1 ? 0 : stored[d];
}

// x * c, c * x or x / c with c a constant scalar (attention's scaling of q and k): one contiguous
// pass of the unary kernel instead of the broadcasting one.
bool lower_scaling(Builder& b, const Node& node) {
  if ((node.kind() != OpKind::kMul && node.kind() != OpKind::kDiv) || node.num_inputs() != 2) {
    return false;
  }
  for (int c : {1, 0}) {
    if (c == 0 && node.kind() == OpKind::kDiv) break;
    const Value* x = node.input(1 - c);
    std::optional<std::vector<float>> k = constant_floats(node.input(c));
    if (!k || k->size() != 1 || shape_of(x) != shape_of(node.output(0))) continue;
    const float factor = node.kind() == OpKind::kMul ? (*k)[0] : 1.0f / (*k)[0];
    return add_unary(b, node, std::string(node.op().name()), {Unary::kScale, {factor, 0.0f}}, x,
                     node.output(0));
  }
  return false;
}

}  // namespace

bool lower_binary(Builder& b, const Node& node) {
  if (const int xi = channel_scale_operand(node);
      xi >= 0 && lower_channel_scale(b, node, node.input(1 - xi), false)) {
    return true;
  }
  auto op = binary_of(node.kind());
  if (!op || node.num_inputs() != 2) return false;
  if (lower_scaling(b, node)) return true;
  const std::optional<Elem> e = common_elem({node.input(0), node.input(1), node.output(0)});
  if (!e) return false;
  const Shape out = shape_of(node.output(0));
  const Shape sa = shape_of(node.input(0));
  const Shape sb = shape_of(node.input(1));
  if (out.rank() > kMaxRank || sa.rank() > out.rank() || sb.rank() > out.rank()) return false;
  // A 4-D result is stored NHWC when an operand is: each operand is read through its own layout's
  // strides, permuted to the output's NHWC order.
  const bool nhwc = out.rank() == 4 && (b.is_nhwc(node.input(0)) || b.is_nhwc(node.input(1)));
  const bool a_nhwc = nhwc && b.is_nhwc(node.input(0));  // else read plain (reordered if needed)
  const bool b_nhwc = nhwc && b.is_nhwc(node.input(1));
  BroadcastIndex index;
  index.rank = out.rank();
  int64_t la[kMaxRank];
  int64_t lb[kMaxRank];
  operand_strides(sa, out, a_nhwc, la);
  operand_strides(sb, out, b_nhwc, lb);
  static constexpr int kNhwc[4] = {0, 2, 3, 1};
  for (int d = 0; d < out.rank(); ++d) {
    const int from = nhwc ? kNhwc[d] : d;
    index.out_dims[d] = out[from];
    index.a_strides[d] = la[from];
    index.b_strides[d] = lb[from];
  }
  const bool contiguous = sa == out && sb == out && a_nhwc == nhwc && b_nhwc == nhwc;
  const int a = nhwc ? b.stored_buffer(node.input(0)) : b.buffer_of(node.input(0));
  const int c = nhwc ? b.stored_buffer(node.input(1)) : b.buffer_of(node.input(1));
  // A ReLU that alone reads the result runs inside the same kernel (the residual Add+Relu).
  const Node* relu = b.only_consumer(node.output(0));
  if (relu != nullptr && relu->kind() != OpKind::kRelu) relu = nullptr;
  if (relu != nullptr) b.mark_fused(relu);
  const int y = b.define((relu != nullptr ? relu : &node)->output(0), nhwc);
  const int64_t n = out.numel();
  const Binary kind = *op;
  const bool fused = relu != nullptr;
  add(b, node, std::string(node.op().name()) + (fused ? "+Relu" : ""), {a, c}, {y},
      [=, e = *e](Session& s) {
        return launch_binary(e, kind, ptr(s, a), ptr(s, c), ptr(s, y), n, index, contiguous, fused,
                             s.stream);
      });
  return true;
}

// Cast between f32, f16 and bf16 (a cast to the same type shares the buffer).
bool lower_cast(Builder& b, const Node& node) {
  const std::optional<Elem> from = elem_of(node.input(0));
  const std::optional<Elem> to = elem_of(node.output(0));
  if (!from || !to) return false;
  if (*from == *to) return lower_alias(b, node);
  const int xi = b.stored_buffer(node.input(0));  // keeps its input's layout
  const int yi = b.define(node.output(0), b.is_nhwc(node.input(0)));
  const int64_t n = shape_of(node.output(0)).numel();
  add(b, node, "Cast", {xi}, {yi}, [=, from = *from, to = *to](Session& s) {
    return launch_cast(from, to, ptr(s, xi), ptr(s, yi), n, s.stream);
  });
  return true;
}

namespace {

bool is_scalar(const Value* v, float want, float tolerance) {
  std::optional<std::vector<float>> c = constant_floats(v);
  return c && c->size() == 1 && std::fabs((*c)[0] - want) <= tolerance;
}

}  // namespace

// Cast(half -> f32) -> op -> Cast(f32 -> half), what the fp16/bf16 conversion leaves around
// LayerNormalization, Softmax and Erf: the op runs on the half tensors directly. Its kernels load
// half and compute in f32, so the result is the same, without two passes over an f32 copy (ViT's
// attention scores at batch 256: 2.4 GB a layer through the casts, 0.5 GB without).
bool lower_in_half(Builder& b, const Node& cast) {
  const std::optional<Elem> half = elem_of(cast.input(0));
  if (!half || *half == Elem::kF32 || elem_of(cast.output(0)) != Elem::kF32) return false;
  const Node* op = b.only_consumer(cast.output(0));
  if (op == nullptr || op->num_outputs() != 1 || op->input(0) != cast.output(0)) return false;
  const Node* back = consumer_as(b, op->output(0), OpKind::kCast);
  if (back == nullptr || elem_of(back->output(0)) != half) return false;
  const Value* x = cast.input(0);
  const Value* y = back->output(0);
  bool lowered = false;
  switch (op->kind()) {
    case OpKind::kLayerNormalization: lowered = lower_layernorm(b, *op, x, y); break;
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: lowered = lower_softmax(b, *op, x, y); break;
    default: lowered = lower_unary(b, *op, x, y); break;
  }
  if (lowered) {
    b.mark_fused(op);
    b.mark_fused(back);
  }
  return lowered;
}

namespace {

// The exact GELU as exported from PyTorch, x * (1 + erf(x / sqrt(2))) * 0.5, from its Div (or Mul
// by 1/sqrt(2)) `scale`, with the fp16/bf16 conversion's Casts around the Erf or without: its nodes
// (`scale` first, the final Mul last), else nothing.
std::optional<std::vector<const Node*>> gelu_chain(const Builder& b, const Node& scale) {
  const Value* x = scale.input(0);
  if (scale.num_inputs() != 2 ||
      !(scale.kind() == OpKind::kDiv ? is_scalar(scale.input(1), 1.41421356f, 1e-3f)
                                     : is_scalar(scale.input(1), 0.70710678f, 1e-3f))) {
    return std::nullopt;
  }
  std::vector<const Node*> chain = {&scale};
  const Value* at = scale.output(0);
  const Node* to_f32 = consumer_as(b, at, OpKind::kCast);
  if (to_f32 != nullptr) {
    chain.push_back(to_f32);
    at = to_f32->output(0);
  }
  const Node* erf = consumer_as(b, at, OpKind::kErf);
  if (erf == nullptr) return std::nullopt;
  chain.push_back(erf);
  at = erf->output(0);
  if (to_f32 != nullptr) {
    const Node* back = consumer_as(b, at, OpKind::kCast);
    if (back == nullptr) return std::nullopt;
    chain.push_back(back);
    at = back->output(0);
  }
  const Node* one = consumer_as(b, at, OpKind::kAdd);
  if (one == nullptr || !is_scalar(other_operand(*one, at), 1.0f, 0.0f)) return std::nullopt;
  const Node* times_x = consumer_as(b, one->output(0), OpKind::kMul);
  if (times_x == nullptr || other_operand(*times_x, one->output(0)) != x) return std::nullopt;
  const Node* half = consumer_as(b, times_x->output(0), OpKind::kMul);
  if (half == nullptr || !is_scalar(other_operand(*half, times_x->output(0)), 0.5f, 0.0f)) {
    return std::nullopt;
  }
  chain.insert(chain.end(), {one, times_x, half});
  return chain;
}

}  // namespace

// The GELU of gelu_chain as one elementwise step instead of five (seven with the casts).
bool lower_gelu(Builder& b, const Node& scale) {
  std::optional<std::vector<const Node*>> chain = gelu_chain(b, scale);
  if (!chain || !add_unary(b, scale, "Gelu", {Unary::kGelu, {0.0f, 0.0f}}, scale.input(0),
                           chain->back()->output(0))) {
    return false;
  }
  for (size_t i = 1; i < chain->size(); ++i) b.mark_fused((*chain)[i]);
  return true;
}

// The GELU that alone reads `x` (a Gelu op, or gelu_chain's Div and Mul by x as the only readers),
// as its nodes, for cuBLASLt's GELU epilogue: only for f16/bf16 results (the epilogue is the tanh
// approximation, at most 4.7e-4 from the exact GELU, at x = 2.7 where f16's spacing is 2e-3) and
// unless KILN_CUDA_GELU_EPILOGUE=0.
std::optional<std::vector<const Node*>> gelu_reading(const Builder& b, const Value* x) {
  const char* env = env_flag_c_str(EnvFlag::kCudaGeluEpilogue);
  if ((env != nullptr && std::strcmp(env, "0") == 0) || elem_of(x) == Elem::kF32) {
    return std::nullopt;
  }
  for (const Value* out : b.graph().outputs()) {
    if (out == x) return std::nullopt;
  }
  // A Gelu op (either form) as the only reader.
  if (const Node* gelu = consumer_as(b, x, OpKind::kGelu)) return std::vector<const Node*>{gelu};
  if (x->uses().size() != 2) return std::nullopt;
  for (const auto& use : x->uses()) {
    if (use.node->kind() != OpKind::kDiv && use.node->kind() != OpKind::kMul) continue;
    std::optional<std::vector<const Node*>> chain = gelu_chain(b, *use.node);
    if (!chain) continue;
    const Node* other = x->uses()[0].node == use.node ? x->uses()[1].node : x->uses()[0].node;
    if (std::find(chain->begin(), chain->end(), other) != chain->end()) return chain;
  }
  return std::nullopt;
}

}  // namespace kiln::compiler::cuda
