// SPDX-License-Identifier: Apache-2.0
// Algebraic simplification: local rewrites that remove work without changing any value.
#include <numeric>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

bool same_tensor_type(const Value* a, const Value* b) {
  return a->type().is_tensor() && b->type().is_tensor() && a->tensor_type() == b->tensor_type() &&
         a->tensor_type().has_rank();
}

// Identity(x) -> x.
Result<bool> remove_identity(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kIdentity || !node->has_input(0)) return false;
  return replace_node(graph, node, node->input(0));
}

// Dropout(x) in inference, with its mask unused -> x.
Result<bool> remove_inference_dropout(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kDropout || !node->has_input(0)) return false;
  if (node->has_input(2)) {
    const Tensor* training = node->input(2)->constant_value();
    if (training == nullptr || training->dtype() != DType::kBool || training->numel() != 1 ||
        *training->data<bool>()) {
      return false;
    }
  }
  if (node->num_outputs() > 1 &&
      (!node->output(1)->uses().empty() || is_graph_output(node->output(1)))) {
    return false;
  }
  return replace_node(graph, node, node->input(0));
}

// Cast(x) to x's own type -> x.
Result<bool> remove_noop_cast(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kCast || !node->has_input(0) || !node->input(0)->type().is_tensor()) {
    return false;
  }
  if (node->output(0)->tensor_type().dtype != node->input(0)->tensor_type().dtype) return false;
  return replace_node(graph, node, node->input(0));
}

// x+0, 0+x, x-0, x*1, 1*x, x/1 -> x, when broadcasting does not change x's type.
Result<bool> remove_neutral_operand(Graph& graph, Node* node) {
  double neutral = 0;
  bool commutative = true;
  switch (node->kind()) {
    case OpKind::kAdd: break;
    case OpKind::kSub: commutative = false; break;
    case OpKind::kMul: neutral = 1; break;
    case OpKind::kDiv:
      neutral = 1;
      commutative = false;
      break;
    default: return false;
  }
  if (!node->has_input(0) || !node->has_input(1)) return false;
  for (int keep : {0, 1}) {
    if (keep == 1 && !commutative) break;
    Value* x = node->input(keep);
    Value* other = node->input(1 - keep);
    if (is_constant_filled_with(other, neutral) && same_tensor_type(x, node->output(0))) {
      return replace_node(graph, node, x);
    }
  }
  return false;
}

std::vector<int64_t> transpose_perm(const ops::Transpose& op, int rank) {
  if (op.perm) return *op.perm;
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.rbegin(), perm.rend(), 0);
  return perm;
}

// Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2), or x when that is the identity.
Result<bool> fuse_transposes(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kTranspose || !node->has_input(0)) return false;
  Node* inner = node->input(0)->producer();
  if (inner == nullptr || inner->kind() != OpKind::kTranspose || !inner->has_input(0)) return false;
  Value* x = inner->input(0);
  if (!x->type().is_tensor() || !x->tensor_type().has_rank()) return false;
  const int rank = x->tensor_type().rank();
  std::vector<int64_t> p1 = transpose_perm(inner->attrs<ops::Transpose>(), rank);
  std::vector<int64_t> p2 = transpose_perm(node->attrs<ops::Transpose>(), rank);
  if (static_cast<int>(p1.size()) != rank || static_cast<int>(p2.size()) != rank) return false;
  std::vector<int64_t> combined(static_cast<size_t>(rank));
  bool identity = true;
  for (int i = 0; i < rank; ++i) {
    combined[static_cast<size_t>(i)] = p1[static_cast<size_t>(p2[static_cast<size_t>(i)])];
    identity &= combined[static_cast<size_t>(i)] == i;
  }
  if (identity) return replace_node(graph, node, x);
  ops::Transpose fused;
  fused.perm = combined;
  node->set_op(Op(std::move(fused)));
  node->set_input(0, x);
  return true;
}

// Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is a constant with no 0 (copy) entries.
Result<bool> fuse_reshapes(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kReshape || !node->has_input(0) || !node->has_input(1)) return false;
  Node* inner = node->input(0)->producer();
  if (inner == nullptr || inner->kind() != OpKind::kReshape || !inner->has_input(0)) return false;
  const Tensor* shape = node->input(1)->constant_value();
  if (shape == nullptr || shape->dtype() != DType::kI64) return false;
  for (int64_t d : shape->span<int64_t>()) {
    if (d == 0) return false;
  }
  node->set_input(0, inner->input(0));
  return true;
}

// Reshape(x) to x's own static shape -> x.
Result<bool> remove_noop_reshape(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kReshape || !node->has_input(0)) return false;
  Value* x = node->input(0);
  if (!same_tensor_type(x, node->output(0)) || !x->tensor_type().is_static()) return false;
  return replace_node(graph, node, x);
}

// Pad(x) by zeros on every side (exporters leave one before AveragePool) -> x.
Result<bool> remove_noop_pad(Graph& graph, Node* node) {
  if (node->kind() != OpKind::kPad || !node->has_input(0) || !node->has_input(1)) return false;
  Value* x = node->input(0);
  if (!same_tensor_type(x, node->output(0)) || !is_constant_filled_with(node->input(1), 0)) {
    return false;
  }
  return replace_node(graph, node, x);
}

class AlgebraicSimplification final : public Pass {
 public:
  std::string_view name() const override { return "algebraic_simplification"; }
  Result<bool> run(Graph& graph) override {
    static const std::vector<RewriteRule> rules = {
        remove_identity,        remove_inference_dropout, remove_noop_cast,
        remove_neutral_operand, fuse_transposes,          fuse_reshapes,
        remove_noop_reshape,    remove_noop_pad,
    };
    return rewrite_to_fixpoint(graph, rules);
  }
};

}  // namespace

std::unique_ptr<Pass> make_algebraic_simplification() {
  return std::make_unique<AlgebraicSimplification>();
}

}  // namespace kiln::compiler
