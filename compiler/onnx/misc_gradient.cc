// SPDX-License-Identifier: Apache-2.0
// Gradient import: walks the forward graph from y back to xs and emits the backward ops.
#include "compiler/onnx/misc_gradient.h"

#include <onnx/onnx_pb.h>

#include <unordered_map>
#include <unordered_set>

#include "compiler/onnx/node_rewriter.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler {

namespace {

class Differentiator {
 public:
  explicit Differentiator(NodeImporter& ni) : ni_(ni), rewriter_(ni) {}

  Result<Value*> op(Op op, std::vector<Value*> inputs) {
    return rewriter_.op(std::move(op), std::move(inputs));
  }
  NodeRewriter& rewriter() { return rewriter_; }

  // A tensor of `like`'s dtype and shape filled with `fill`: a constant when the shape is static,
  // else Shape + ConstantOfShape.
  Result<Value*> filled_like(Value* like, double fill) {
    const TensorType& type = like->tensor_type();
    Shape shape = type.is_static() ? type.shape() : Shape{1};
    Tensor value(type.dtype, shape);
    visit_dtype(value.dtype(), [&]<class T>() {
      if constexpr (!std::is_same_v<T, std::string>) {
        for (T& e : value.span<T>()) e = static_cast<T>(fill);
      }
    });
    if (type.is_static()) return ni_.constant(std::move(value));
    KILN_ASSIGN_OR_RETURN(Value * dims, op(Op(ops::Shape{}), {like}));
    ops::ConstantOfShape c;
    c.value = std::move(value);
    return op(Op(std::move(c)), {dims});
  }

  // Sums `grad` (shaped like the broadcast output) back to the shape of `x`.
  Result<Value*> unbroadcast(Value* grad, Value* x) {
    const TensorType& g = grad->tensor_type();
    const TensorType& t = x->tensor_type();
    if (g == t) return grad;
    if (!g.is_static() || !t.is_static()) {
      return ni_.errorf("differentiating through a broadcast needs static shapes, got {} and {}",
                        g.to_string(), t.to_string());
    }
    const Shape gs = g.shape(), ts = t.shape();
    if (gs == ts) return grad;
    std::vector<int64_t> axes;
    const int lead = gs.rank() - ts.rank();
    for (int i = 0; i < gs.rank(); ++i) {
      if (i < lead || (ts[i - lead] == 1 && gs[i] != 1)) axes.push_back(i);
    }
    ops::ReduceSum sum;
    sum.axes = axes;
    KILN_ASSIGN_OR_RETURN(Value * reduced, op(Op(sum), {grad}));
    return op(Op(ops::Reshape{}), {reduced, ni_.constant(Tensor::from_vector(ts.dims()))});
  }

  Status accumulate(Value* v, Value* g) {
    auto it = grads_.find(v);
    if (it == grads_.end()) {
      grads_[v] = g;
      return Status();
    }
    KILN_ASSIGN_OR_RETURN(it->second, op(Op(ops::Add{}), {it->second, g}));
    return Status();
  }

  Status run(const std::vector<Value*>& xs, Value* y) {
    // Values that depend on some x: only they receive gradients.
    std::unordered_set<const Value*> needed(xs.begin(), xs.end());
    std::vector<Node*> order;
    for (auto& node : ni_.graph().nodes()) {
      order.push_back(node.get());
      for (Value* in : node->inputs()) {
        if (in != nullptr && needed.count(in)) {
          for (Value* out : node->outputs()) needed.insert(out);
        }
      }
    }
    KILN_ASSIGN_OR_RETURN(Value * seed, filled_like(y, 1.0));
    grads_[y] = seed;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* node = *it;
      if (node->num_outputs() != 1) continue;
      auto g = grads_.find(node->output(0));
      if (g == grads_.end()) continue;
      KILN_RETURN_IF_ERROR(backward(*node, g->second, needed));
    }
    return Status();
  }

  Value* grad_of(Value* x) const {
    auto it = grads_.find(x);
    return it == grads_.end() ? nullptr : it->second;
  }

 private:
  Status backward(Node& node, Value* dy, const std::unordered_set<const Value*>& needed) {
    auto wants = [&](int i) { return node.has_input(i) && needed.count(node.input(i)) > 0; };
    if (!wants(0) && !wants(1)) return Status();
    Value* a = node.input(0);
    Value* b = node.num_inputs() > 1 ? node.input(1) : nullptr;
    auto give = [&](int i, Result<Value*> g) -> Status {
      if (!g.ok()) return g.status();
      KILN_ASSIGN_OR_RETURN(Value * summed, unbroadcast(*g, node.input(i)));
      return accumulate(node.input(i), summed);
    };
    switch (node.kind()) {
      case OpKind::kIdentity: return give(0, dy);
      case OpKind::kNeg: return give(0, op(Op(ops::Neg{}), {dy}));
      case OpKind::kAdd:
        if (wants(0)) KILN_RETURN_IF_ERROR(give(0, dy));
        if (wants(1)) KILN_RETURN_IF_ERROR(give(1, dy));
        return Status();
      case OpKind::kSub:
        if (wants(0)) KILN_RETURN_IF_ERROR(give(0, dy));
        if (wants(1)) KILN_RETURN_IF_ERROR(give(1, op(Op(ops::Neg{}), {dy})));
        return Status();
      case OpKind::kMul:
        if (wants(0)) KILN_RETURN_IF_ERROR(give(0, op(Op(ops::Mul{}), {dy, b})));
        if (wants(1)) KILN_RETURN_IF_ERROR(give(1, op(Op(ops::Mul{}), {dy, a})));
        return Status();
      case OpKind::kDiv: {
        if (wants(0)) KILN_RETURN_IF_ERROR(give(0, op(Op(ops::Div{}), {dy, b})));
        if (!wants(1)) return Status();
        // d(a/b)/db = -a / b^2
        KILN_ASSIGN_OR_RETURN(Value * b2, op(Op(ops::Mul{}), {b, b}));
        KILN_ASSIGN_OR_RETURN(Value * q, op(Op(ops::Div{}), {a, b2}));
        KILN_ASSIGN_OR_RETURN(Value * dq, op(Op(ops::Mul{}), {dy, q}));
        return give(1, op(Op(ops::Neg{}), {dq}));
      }
      case OpKind::kMatMul: {
        if (a->tensor_type().rank() != 2 || b->tensor_type().rank() != 2) {
          return ni_.errorf("Gradient supports MatMul of 2-D operands only, got {} and {}",
                            a->tensor_type().to_string(), b->tensor_type().to_string());
        }
        if (wants(0)) {
          KILN_ASSIGN_OR_RETURN(Value * bt, op(Op(ops::Transpose{}), {b}));
          KILN_RETURN_IF_ERROR(give(0, op(Op(ops::MatMul{}), {dy, bt})));
        }
        if (wants(1)) {
          KILN_ASSIGN_OR_RETURN(Value * at, op(Op(ops::Transpose{}), {a}));
          KILN_RETURN_IF_ERROR(give(1, op(Op(ops::MatMul{}), {at, dy})));
        }
        return Status();
      }
      default:
        return unimplemented_error(std::string(
            ni_.errorf("Gradient cannot differentiate through {} yet", node.describe()).message()));
    }
  }

  NodeImporter& ni_;
  NodeRewriter rewriter_;
  std::unordered_map<const Value*, Value*> grads_;
};

}  // namespace

Status import_gradient(NodeImporter& ni) {
  const onnx::AttributeProto* xs_attr = ni.attr("xs");
  std::optional<std::string> y_name = ni.string_attr("y");
  if (xs_attr == nullptr || !y_name) return ni.error("expected the xs and y attributes");
  if (xs_attr->strings_size() != ni.num_outputs()) {
    return ni.errorf("has {} outputs for {} xs", ni.num_outputs(), xs_attr->strings_size());
  }
  std::vector<Value*> xs;
  for (const std::string& name : xs_attr->strings()) {
    Value* x = ni.lookup(name);
    if (x == nullptr || !x->type().is_tensor())
      return ni.errorf("xs names \"{}\", which is not a tensor in scope", name);
    xs.push_back(x);
  }
  Value* y = ni.lookup(*y_name);
  if (y == nullptr || !y->type().is_tensor())
    return ni.errorf("y names \"{}\", which is not a tensor in scope", *y_name);

  Differentiator d(ni);
  KILN_RETURN_IF_ERROR(d.run(xs, y));
  for (int i = 0; i < ni.num_outputs(); ++i) {
    Value* g = d.grad_of(xs[static_cast<size_t>(i)]);
    if (g == nullptr) {
      KILN_ASSIGN_OR_RETURN(g, d.filled_like(xs[static_cast<size_t>(i)], 0.0));
    }
    KILN_RETURN_IF_ERROR(d.rewriter().output(i, g));
  }
  return Status();
}

}  // namespace kiln::compiler
