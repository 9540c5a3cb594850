// SPDX-License-Identifier: Apache-2.0
// The eltwise nodes a oneDNN step runs as post-ops: single eltwise nodes, linear scales, and the
// GELU (erf and tanh forms) and SiLU patterns as ONNX exporters write them.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/lowering.h"

namespace kiln::compiler::cpu {

namespace {

std::optional<float> scalar_constant(const Node& node, int input) {
  if (!node.has_input(input)) return std::nullopt;
  const Tensor* t = node.input(input)->constant_value();
  if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

bool is_scalar(const Value* v, float want, float tolerance) {
  const Tensor* t = v->constant_value();
  return t != nullptr && t->dtype() == DType::kF32 && t->numel() == 1 &&
         std::abs(t->data<float>()[0] - want) <= tolerance;
}

// GELU as ONNX exporters write it: Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), with the two
// Muls in either order. Returns the pattern's output and nodes, or nullptr.
const Value* match_gelu(const Value* x, std::vector<const Node*>& nodes) {
  if (x->uses().size() != 2 || is_graph_output(x)) return nullptr;
  const Node* div = nullptr;
  const Node* mul = nullptr;
  for (const Use& u : x->uses()) {
    if (u.node->kind() == OpKind::kDiv && u.index == 0) div = u.node;
    if (u.node->kind() == OpKind::kMul) mul = u.node;
  }
  if (div == nullptr || mul == nullptr || !is_scalar(div->input(1), 1.41421356f, 1e-3f)) {
    return nullptr;
  }
  const Node* erf = sole_user(div->output(0));
  if (erf == nullptr || erf->kind() != OpKind::kErf) return nullptr;
  const Node* add = sole_user(erf->output(0));
  if (add == nullptr || add->kind() != OpKind::kAdd) return nullptr;
  const Value* one = other_input(*add, erf->output(0));
  if (one == nullptr || !is_scalar(one, 1.0f, 0.0f)) return nullptr;
  // x * (1 + erf) then * 0.5, or x * 0.5 then * (1 + erf).
  const Node* last = nullptr;
  const Value* mul_other = other_input(*mul, x);
  if (mul_other == add->output(0)) {
    last = sole_user(mul->output(0));
    if (last == nullptr || last->kind() != OpKind::kMul) return nullptr;
    const Value* half = other_input(*last, mul->output(0));
    if (half == nullptr || !is_scalar(half, 0.5f, 0.0f)) return nullptr;
  } else if (mul_other != nullptr && is_scalar(mul_other, 0.5f, 0.0f)) {
    last = sole_user(mul->output(0));
    if (last == nullptr || last->kind() != OpKind::kMul ||
        other_input(*last, mul->output(0)) != add->output(0) || sole_user(add->output(0)) != last) {
      return nullptr;
    }
  } else {
    return nullptr;
  }
  if (mul_other == add->output(0) && sole_user(add->output(0)) != mul) return nullptr;
  if (last->output(0)->tensor_type().shape() != x->tensor_type().shape()) return nullptr;
  nodes.insert(nodes.end(), {div, erf, add, mul, last});
  return last->output(0);
}

// The node of `kind` using `v` whose other input is the scalar constant `want` (within 1e-4).
const Node* scalar_user(const Value* v, OpKind kind, float want) {
  const Node* n = sole_user(v);
  if (n == nullptr || n->kind() != kind) return nullptr;
  const Value* c = other_input(*n, v);
  return c != nullptr && is_scalar(c, want, 1e-4f) ? n : nullptr;
}

// GELU's tanh form as exporters write it: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// with x^3 as Mul(x, Mul(x, x)) or Pow(x, 3), and the 0.5 applied first or last. Returns the
// pattern's output and nodes, or nullptr.
const Value* match_gelu_tanh(const Value* x, std::vector<const Node*>& nodes) {
  if (is_graph_output(x)) return nullptr;
  // x + 0.044715 * x^3, found from the Add among x's users.
  std::vector<const Node*> found;
  const Node* inner = nullptr;
  for (const Use& u : x->uses()) {
    if (u.node->kind() != OpKind::kAdd || inner != nullptr) continue;
    const Node* scaled =
        other_input(*u.node, x) != nullptr ? other_input(*u.node, x)->producer() : nullptr;
    if (scaled == nullptr || scaled->kind() != OpKind::kMul ||
        sole_user(scaled->output(0)) != u.node) {
      continue;
    }
    const Value* cube = nullptr;
    for (int i = 0; i < 2; ++i) {
      if (is_scalar(scaled->input(i), 0.044715f, 1e-5f)) cube = scaled->input(1 - i);
    }
    const Node* c = cube != nullptr ? cube->producer() : nullptr;
    if (c == nullptr || sole_user(cube) != scaled) continue;
    std::vector<const Node*> cube_nodes = {c};
    if (c->kind() == OpKind::kPow) {
      if (c->input(0) != x || !is_scalar(c->input(1), 3.0f, 0.0f)) continue;
    } else if (c->kind() == OpKind::kMul && c->num_inputs() == 2) {
      const Value* sq = other_input(*c, x);
      const Node* s = sq != nullptr ? sq->producer() : nullptr;
      if (s == nullptr || s->kind() != OpKind::kMul || s->input(0) != x || s->input(1) != x ||
          sole_user(sq) != c) {
        continue;
      }
      cube_nodes.push_back(s);
    } else {
      continue;
    }
    inner = u.node;
    found = cube_nodes;
    found.push_back(scaled);
    found.push_back(inner);
  }
  if (inner == nullptr) return nullptr;
  const Node* arg = scalar_user(inner->output(0), OpKind::kMul, 0.7978845608f);
  const Node* tanh = arg != nullptr ? sole_user(arg->output(0)) : nullptr;
  if (tanh == nullptr || tanh->kind() != OpKind::kTanh) return nullptr;
  const Node* one_plus = scalar_user(tanh->output(0), OpKind::kAdd, 1.0f);
  const Node* mul = one_plus != nullptr ? sole_user(one_plus->output(0)) : nullptr;
  if (mul == nullptr || mul->kind() != OpKind::kMul) return nullptr;
  const Value* other = other_input(*mul, one_plus->output(0));
  const Node* half = nullptr;  // Mul by 0.5, of x first or of the product last
  const Node* last = mul;
  if (other == x) {
    half = scalar_user(mul->output(0), OpKind::kMul, 0.5f);
    last = half;
  } else if (other != nullptr && other->producer() != nullptr && sole_user(other) == mul) {
    const Node* h = other->producer();
    const Value* c = other_input(*h, x);
    if (h->kind() == OpKind::kMul && (h->input(0) == x || h->input(1) == x) && c != nullptr &&
        c != x && is_scalar(c, 0.5f, 1e-4f)) {
      half = h;
    }
  }
  if (half == nullptr || last == nullptr) return nullptr;
  found.insert(found.end(), {arg, tanh, one_plus, mul, half});
  // Every use of x is in the pattern (Mul(x, x) uses it twice).
  size_t uses = 0;
  for (const Use& u : x->uses()) {
    uses += std::find(found.begin(), found.end(), u.node) != found.end() ? 1 : 0;
  }
  if (uses != x->uses().size()) return nullptr;
  if (last->output(0)->tensor_type().shape() != x->tensor_type().shape()) return nullptr;
  nodes.insert(nodes.end(), found.begin(), found.end());
  return last->output(0);
}

// Mul by a scalar constant (on either side) or Div by one, reading `x`: a linear scale.
std::optional<Eltwise> scale_of(const Node& node, const Value* x) {
  if (node.num_inputs() != 2 || node.num_outputs() != 1 || !same_float({x, node.output(0)}) ||
      x->tensor_type().shape() != node.output(0)->tensor_type().shape()) {
    return std::nullopt;
  }
  if (node.kind() == OpKind::kMul) {
    std::optional<float> c = scalar_constant(node, node.input(0) == x ? 1 : 0);
    if (c) return Eltwise{dnnl::algorithm::eltwise_linear, *c, 0.0f};
  } else if (node.kind() == OpKind::kDiv && node.input(0) == x) {
    std::optional<float> c = scalar_constant(node, 1);
    if (c && *c != 0.0f) return Eltwise{dnnl::algorithm::eltwise_linear, 1.0f / *c, 0.0f};
  }
  return std::nullopt;
}

}  // namespace

std::optional<Eltwise> eltwise_of(const Node& node) {
  if (node.num_outputs() != 1 || !node.has_input(0) ||
      !same_float({node.input(0), node.output(0)})) {
    return std::nullopt;
  }
  switch (node.kind()) {
    case OpKind::kRelu: return Eltwise{dnnl::algorithm::eltwise_relu};
    case OpKind::kLeakyRelu:
      return Eltwise{dnnl::algorithm::eltwise_relu, node.attrs<ops::LeakyRelu>().alpha};
    case OpKind::kSigmoid: return Eltwise{dnnl::algorithm::eltwise_logistic};
    case OpKind::kTanh: return Eltwise{dnnl::algorithm::eltwise_tanh};
    case OpKind::kExp: return Eltwise{dnnl::algorithm::eltwise_exp};
    case OpKind::kAbs: return Eltwise{dnnl::algorithm::eltwise_abs};
    case OpKind::kSqrt: return Eltwise{dnnl::algorithm::eltwise_sqrt};
    case OpKind::kElu: return Eltwise{dnnl::algorithm::eltwise_elu, node.attrs<ops::Elu>().alpha};
    case OpKind::kHardSwish: return Eltwise{dnnl::algorithm::eltwise_hardswish};
    case OpKind::kGelu:
      return Eltwise{node.attrs<ops::Gelu>().approximate == "tanh"
                         ? dnnl::algorithm::eltwise_gelu_tanh
                         : dnnl::algorithm::eltwise_gelu_erf};
    case OpKind::kSwish:
      return Eltwise{dnnl::algorithm::eltwise_swish, node.attrs<ops::Swish>().alpha};
    case OpKind::kLog: return Eltwise{dnnl::algorithm::eltwise_log};
    case OpKind::kNeg: return Eltwise{dnnl::algorithm::eltwise_linear, -1.0f, 0.0f};
    case OpKind::kReciprocal: return Eltwise{dnnl::algorithm::eltwise_pow, 1.0f, -1.0f};
    case OpKind::kPow: {
      // A constant scalar exponent (STFT magnitudes' x^2, exporters' LayerNorm variance).
      std::optional<float> p = scalar_constant(node, 1);
      if (!p) return std::nullopt;
      if (*p == 2.0f) return Eltwise{dnnl::algorithm::eltwise_square};
      if (*p == 1.0f) return Eltwise{dnnl::algorithm::eltwise_linear, 1.0f, 0.0f};
      return Eltwise{dnnl::algorithm::eltwise_pow, 1.0f, *p};
    }
    case OpKind::kClip: {
      float lo = -FLT_MAX;
      float hi = FLT_MAX;
      for (int i = 1; i < 3; ++i) {
        if (!node.has_input(i)) continue;
        std::optional<float> v = scalar_constant(node, i);
        if (!v) return std::nullopt;
        (i == 1 ? lo : hi) = *v;
      }
      return Eltwise{dnnl::algorithm::eltwise_clip_v2, lo, hi};
    }
    default: return std::nullopt;
  }
}

namespace {

// Whether `chain` holds an op of `e`'s algorithm with other parameters (see trailing_eltwise).
bool clashes(const std::vector<Eltwise>& chain, const Eltwise& e) {
  for (const Eltwise& c : chain) {
    if (c.algorithm == e.algorithm && (c.alpha != e.alpha || c.beta != e.beta)) return true;
  }
  return false;
}

}  // namespace

Tail trailing_eltwise(const Value* y, int max_ops, const std::vector<Eltwise>& before) {
  Tail tail;
  tail.out = y;
  while (static_cast<int>(tail.ops.size()) < max_ops && !is_graph_output(tail.out)) {
    const auto& uses = tail.out->uses();
    if (uses.size() == 1) {
      const Node* next = uses[0].node;
      std::optional<Eltwise> e;
      if (next->graph() == y->graph()) {
        e = uses[0].index == 0 ? eltwise_of(*next) : std::nullopt;
        if (!e) e = scale_of(*next, tail.out);
      }
      if (!e || clashes(before, *e)) break;
      // Adjacent linear scales fold into one (two would clash, below); a chain otherwise stops
      // before an op whose algorithm it already holds with other parameters.
      if (e->algorithm == dnnl::algorithm::eltwise_linear && !tail.ops.empty() &&
          tail.ops.back().algorithm == dnnl::algorithm::eltwise_linear) {
        Eltwise& last = tail.ops.back();
        last = {dnnl::algorithm::eltwise_linear, e->alpha * last.alpha,
                e->alpha * last.beta + e->beta};
      } else if (clashes(tail.ops, *e)) {
        break;
      } else {
        tail.ops.push_back(*e);
      }
      tail.nodes.push_back(next);
      tail.kinds += "+" + std::string(next->op().name());
      tail.out = next->output(0);
      continue;
    }
    if (const Value* out = match_gelu(tail.out, tail.nodes)) {
      tail.ops.push_back({dnnl::algorithm::eltwise_gelu_erf});
      tail.kinds += "+Gelu";
      tail.out = out;
      continue;
    }
    if (const Value* out = match_gelu_tanh(tail.out, tail.nodes)) {
      tail.ops.push_back({dnnl::algorithm::eltwise_gelu_tanh});
      tail.kinds += "+GeluTanh";
      tail.out = out;
      continue;
    }
    if (uses.size() == 2) {
      // Sigmoid(x) and Mul(x, Sigmoid(x)), in either order.
      const Node* sigmoid = nullptr;
      const Node* mul = nullptr;
      for (const Use& u : uses) {
        if (u.node->kind() == OpKind::kSigmoid) sigmoid = u.node;
        if (u.node->kind() == OpKind::kMul) mul = u.node;
      }
      if (sigmoid == nullptr || mul == nullptr || mul->num_inputs() != 2) break;
      const Value* s = sigmoid->output(0);
      if (s->uses().size() != 1 || s->uses()[0].node != mul || is_graph_output(s)) break;
      if (mul->output(0)->tensor_type().shape() != y->tensor_type().shape()) break;
      tail.ops.push_back({dnnl::algorithm::eltwise_swish, 1.0f});
      tail.nodes.push_back(sigmoid);
      tail.nodes.push_back(mul);
      tail.kinds += "+SiLU";
      tail.out = mul->output(0);
      continue;
    }
    break;
  }
  return tail;
}

void append(dnnl::post_ops& post, const std::vector<Eltwise>& ops) {
  for (const Eltwise& e : ops) post.append_eltwise(1.0f, e.algorithm, e.alpha, e.beta);
}

}  // namespace kiln::compiler::cpu
