// SPDX-License-Identifier: Apache-2.0
// Layer-norm fusion: LayerNorm as exporters before opset 17 write it (ReduceMean, Sub, Pow,
// ReduceMean, Add, Sqrt, Div, then Mul by the scale and Add of the bias) becomes one
// LayerNormalization node, which targets run as one kernel.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

// The node producing `v` when it is of `kind` and `v` is read by `uses` nodes only, none of them
// returned by the graph; else nullptr.
Node* producer_of(const Value* v, OpKind kind, size_t uses = 1) {
  Node* p = v->producer();
  if (p == nullptr || p->kind() != kind || v->uses().size() != uses || is_graph_output(v)) {
    return nullptr;
  }
  return p;
}

// The one element of an f32 scalar constant (of any rank).
std::optional<float> scalar_of(const Value* v) {
  const Tensor* t = v->constant_value();
  if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

// A ReduceMean over the last axis of its input only, keeping dims.
bool is_last_axis_mean(const Node& n) {
  if (n.kind() != OpKind::kReduceMean || !n.has_input(0)) return false;
  const auto& op = n.attrs<ops::ReduceMean>();
  const TensorType& t = n.input(0)->tensor_type();
  if (op.keepdims != 1 || !op.axes || op.axes->size() != 1 || !t.has_rank()) return false;
  const int64_t axis = (*op.axes)[0];
  return axis == -1 || axis == t.rank() - 1;
}

// An f32 constant of `c` elements laid along the last axis (shape [c], [1, c], ...).
const Tensor* per_channel(const Value* v, int64_t c) {
  const Tensor* t = v->constant_value();
  if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != c || t->rank() < 1 ||
      t->shape()[t->rank() - 1] != c) {
    return nullptr;
  }
  return t;
}

// The input of a two-input node other than `one`.
Value* other(const Node& n, const Value* one) {
  return n.input(0) == one ? n.input(1) : n.input(0);
}

// Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))) with d = Sub(x, ReduceMean(x)), then optionally
// Mul(., scale) and Add(., bias) with constants over the last axis  ==>  LayerNormalization.
Result<bool> fuse_layer_norm(Graph& graph, Node* div) {
  if (div->kind() != OpKind::kDiv || div->num_inputs() != 2) return false;
  Value* d = div->input(0);
  Node* sqrt = producer_of(div->input(1), OpKind::kSqrt);
  if (sqrt == nullptr) return false;
  Node* add_eps = producer_of(sqrt->input(0), OpKind::kAdd);
  if (add_eps == nullptr || add_eps->num_inputs() != 2) return false;
  Node* var = nullptr;
  std::optional<float> eps;
  for (int i = 0; i < 2; ++i) {
    Node* p = producer_of(add_eps->input(i), OpKind::kReduceMean);
    std::optional<float> e = scalar_of(add_eps->input(1 - i));
    if (p != nullptr && e) var = p, eps = e;
  }
  if (var == nullptr || !is_last_axis_mean(*var)) return false;
  // (x - mean)^2 as Pow(d, 2) or Mul(d, d).
  Node* square = var->input(0)->producer();
  if (square == nullptr || var->input(0)->uses().size() != 1 || is_graph_output(var->input(0))) {
    return false;
  }
  size_t d_uses = 0;
  if (square->kind() == OpKind::kPow && square->num_inputs() == 2 && square->input(0) == d &&
      scalar_of(square->input(1)) == 2.0f) {
    d_uses = 2;
  } else if (square->kind() == OpKind::kMul && square->num_inputs() == 2 && square->input(0) == d &&
             square->input(1) == d) {
    d_uses = 3;
  } else {
    return false;
  }
  Node* sub = producer_of(d, OpKind::kSub, d_uses);
  if (sub == nullptr || sub->num_inputs() != 2) return false;
  Value* x = sub->input(0);
  Node* mean = producer_of(sub->input(1), OpKind::kReduceMean);
  if (mean == nullptr || mean->input(0) != x || !is_last_axis_mean(*mean)) return false;
  const TensorType& xt = x->tensor_type();
  if (xt.dtype != DType::kF32 || !xt.has_rank() || xt.rank() < 1) return false;
  const int64_t c = xt.dims->back().value;
  if (c <= 0) return false;

  // The scale and bias that follow, when they are constants over the last axis.
  Node* last = div;
  Value* scale = nullptr;
  Value* bias = nullptr;
  auto sole_user = [](const Node* n, OpKind kind) -> Node* {
    const Value* y = n->output(0);
    if (y->uses().size() != 1 || is_graph_output(y)) return nullptr;
    Node* u = y->uses()[0].node;
    return u->kind() == kind && u->num_inputs() == 2 ? u : nullptr;
  };
  if (Node* mul = sole_user(last, OpKind::kMul);
      mul != nullptr && per_channel(other(*mul, last->output(0)), c) != nullptr) {
    scale = other(*mul, last->output(0));
    last = mul;
  }
  if (Node* add = sole_user(last, OpKind::kAdd);
      add != nullptr && per_channel(other(*add, last->output(0)), c) != nullptr) {
    bias = other(*add, last->output(0));
    last = add;
  }
  if (!last->output(0)->type().is_tensor() || !(last->output(0)->tensor_type() == xt)) {
    return false;
  }
  // A pattern fused already (its nodes are left to dead-code elimination) reads nothing any more:
  // fusing it again each round made 544 LayerNormalizations of a wake-word model's one.
  if (last->output(0)->uses().empty() && !is_graph_output(last->output(0))) return false;
  // LayerNormalization wants [c] parameters (a scale of ones when the pattern has none).
  auto as_vector = [&](const Value* v, const std::string& name) {
    const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
    Tensor flat = t != nullptr ? t->clone().reshaped(Shape{c}) : Tensor(DType::kF32, Shape{c});
    if (t == nullptr) {
      for (float& f : flat.span<float>()) f = 1.0f;
    }
    return graph.add_constant(std::move(flat), graph.unique_name(name), last);
  };
  ops::LayerNormalization op;
  op.axis = -1;
  op.epsilon = *eps;
  std::vector<Value*> inputs = {x, as_vector(scale, div->name() + "_scale")};
  if (bias != nullptr) inputs.push_back(as_vector(bias, div->name() + "_bias"));
  Node* ln = graph.add_node(Op(op), std::move(inputs), 1, div->name(), last);
  ln->output(0)->set_type(last->output(0)->type());
  ln->output(0)->set_name(graph.unique_name(last->output(0)->name() + "_ln"));
  // The pattern's nodes are left to dead-code elimination (a rule erases only its own node).
  if (forward_output(last, 0, ln->output(0))) return true;
  return internal_error(
      fmt::format("{}: could not forward the fused LayerNormalization", div->describe()));
}

class LayerNormFusion final : public Pass {
 public:
  std::string_view name() const override { return "layer_norm_fusion"; }
  Result<bool> run(Graph& graph) override { return rewrite_to_fixpoint(graph, {fuse_layer_norm}); }
};

}  // namespace

std::unique_ptr<Pass> make_layer_norm_fusion() {
  return std::make_unique<LayerNormFusion>();
}

}  // namespace kiln::compiler
