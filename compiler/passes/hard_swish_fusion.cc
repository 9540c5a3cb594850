// SPDX-License-Identifier: Apache-2.0
// HardSwish fusion: x * Clip(x + 3, 0, 6) / 6, as exporters write hard-swish below opset 14
// (torch's MobileNetV3 at opset 13, paddle2onnx's at opset 9), becomes one HardSwish(x): one
// elementwise op (a post-op of the convolution before it on the cpu target) instead of four.
#include <cmath>
#include <optional>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

// The value of a constant scalar (or one-element) float tensor.
std::optional<double> scalar_of(const Value* v) {
  const Tensor* t = v == nullptr ? nullptr : v->constant_value();
  if (t == nullptr || t->numel() != 1 || !dtype_is_float(t->dtype())) return std::nullopt;
  return tensor_to_doubles(*t).at(0);
}

bool near(std::optional<double> v, double want) {
  return v && std::abs(*v - want) <= 1e-6 * std::max(1.0, std::abs(want));
}

// The node producing `v` when it is of `kind`, `v` is read by nothing else and not returned.
Node* single_use_producer(const Value* v, OpKind kind) {
  Node* p = v->producer();
  if (p == nullptr || p->kind() != kind || v->uses().size() != 1 || is_graph_output(v)) {
    return nullptr;
  }
  return p;
}

// x when `v` is Clip(x + 3, 0, 6) (the Add's operands in either order), read once.
Value* shifted_relu6_source(const Value* v) {
  const Node* clip = single_use_producer(v, OpKind::kClip);
  if (clip == nullptr || clip->num_inputs() != 3 || !clip->has_input(1) || !clip->has_input(2) ||
      !near(scalar_of(clip->input(1)), 0.0) || !near(scalar_of(clip->input(2)), 6.0)) {
    return nullptr;
  }
  const Node* add = single_use_producer(clip->input(0), OpKind::kAdd);
  if (add == nullptr || add->num_inputs() != 2) return nullptr;
  for (int i = 0; i < 2; ++i) {
    if (near(scalar_of(add->input(1 - i)), 3.0) && add->input(i)->constant_value() == nullptr) {
      return add->input(i);
    }
  }
  return nullptr;
}

// The other operand of a two-input `node` when one operand is the scale `s` (Mul by s, or Div
// by 1 / s: `node` divides its input 0 then), else nullptr.
Value* scaled_operand(const Node& node, double s) {
  if (node.num_inputs() != 2) return nullptr;
  if (node.kind() == OpKind::kDiv) {
    return near(scalar_of(node.input(1)), 1.0 / s) ? node.input(0) : nullptr;
  }
  if (node.kind() != OpKind::kMul) return nullptr;
  for (int i = 0; i < 2; ++i) {
    if (near(scalar_of(node.input(1 - i)), s)) return node.input(i);
  }
  return nullptr;
}

// x when `v` is hard-sigmoid's 1/6 form of x, read once: Clip(x + 3, 0, 6) / 6 (or * 1/6), or
// HardSigmoid(x) with alpha 1/6 and beta 1/2.
Value* hard_sigmoid_source(const Value* v) {
  Node* p = v->producer();
  if (p == nullptr || v->uses().size() != 1 || is_graph_output(v)) return nullptr;
  if (p->kind() == OpKind::kHardSigmoid) {
    const auto& op = p->attrs<ops::HardSigmoid>();
    return near(op.alpha, 1.0 / 6.0) && near(op.beta, 0.5) ? p->input(0) : nullptr;
  }
  const Value* r = scaled_operand(*p, 1.0 / 6.0);
  return r == nullptr ? nullptr : shifted_relu6_source(r);
}

// `out` (the pattern's last output) as HardSwish(x), when the types agree.
Result<bool> replace_by_hard_swish(Graph& graph, Node* last, Value* x) {
  if (!x->type().is_tensor() || !last->output(0)->type().is_tensor() ||
      !(x->tensor_type() == last->output(0)->tensor_type()) ||
      !dtype_is_float(x->tensor_type().dtype)) {
    return false;
  }
  Node* hs = graph.add_node(Op(ops::HardSwish{}), {x}, 1, last->name() + "_hard_swish", last);
  KILN_RETURN_IF_ERROR(infer_node(*hs));
  return replace_node(graph, last, hs->output(0));
}

// Mul(x, Clip(x + 3, 0, 6)) scaled by 1/6 (Div by 6 or Mul by 1/6)  ==>  HardSwish(x).
Result<bool> fuse_scaled_product(Graph& graph, Node* node) {
  const Value* product = scaled_operand(*node, 1.0 / 6.0);
  if (product == nullptr) return false;
  const Node* mul = single_use_producer(product, OpKind::kMul);
  if (mul == nullptr || mul->num_inputs() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    if (shifted_relu6_source(mul->input(1 - i)) == mul->input(i)) {
      return replace_by_hard_swish(graph, node, mul->input(i));
    }
  }
  return false;
}

// Mul(x, hard-sigmoid(x))  ==>  HardSwish(x).
Result<bool> fuse_gated(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kMul || node->num_inputs() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    if (hard_sigmoid_source(node->input(1 - i)) == node->input(i)) {
      return replace_by_hard_swish(graph, node, node->input(i));
    }
  }
  return false;
}

class HardSwishFusion final : public Pass {
 public:
  std::string_view name() const override { return "hard_swish_fusion"; }
  Result<bool> run(Graph& graph) override {
    return rewrite_to_fixpoint(graph, {fuse_scaled_product, fuse_gated});
  }
};

}  // namespace

std::unique_ptr<Pass> make_hard_swish_fusion() {
  return std::make_unique<HardSwishFusion>();
}

}  // namespace kiln::compiler
