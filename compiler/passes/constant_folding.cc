// SPDX-License-Identifier: Apache-2.0
// Constant folding: nodes whose inputs are all constants run once, at compile time, on the ref
// kernels; Shape and Size of static shapes become constants too.
#include <algorithm>
#include <cstring>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {

namespace {

bool is_random(OpKind kind) {
  switch (kind) {
    case OpKind::kBernoulli:
    case OpKind::kRandomUniform:
    case OpKind::kRandomUniformLike:
    case OpKind::kRandomNormal:
    case OpKind::kRandomNormalLike:
    case OpKind::kMultinomial:
    case OpKind::kDropout: return true;
    default: return false;
  }
}

// DequantizeLinear of an 8-bit constant: quantized weights stay quantized, for the targets'
// integer rewrites (qdq_fusion) to find.
bool is_quantized_weight(const Node& node) {
  if (node.kind() != OpKind::kDequantizeLinear || !node.has_input(0)) return false;
  const Tensor* t = node.input(0)->constant_value();
  return t != nullptr && (t->dtype() == DType::kI8 || t->dtype() == DType::kU8);
}

// The value of Shape/Size when the input's shape is static, without touching its data.
std::optional<Tensor> static_shape_value(const Node& node) {
  if (!node.has_input(0) || !node.input(0)->type().is_tensor()) return std::nullopt;
  const TensorType& t = node.input(0)->tensor_type();
  if (!t.is_static()) return std::nullopt;
  const Shape shape = t.shape();
  if (node.kind() == OpKind::kSize) return Tensor::scalar<int64_t>(shape.numel());
  const auto& op = node.attrs<ops::Shape>();
  const int64_t rank = shape.rank();
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clamp(op.start);
  int64_t end = op.end ? clamp(*op.end) : rank;
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(shape[static_cast<int>(i)]);
  return Tensor::from_vector(dims);
}

// The value of a node that only moves elements, by reinterpreting or copying runs of bytes where
// the ref kernels copy element by element (a millisecond for an LSTM's 64K weights, compile time
// a small model's first run waits for): Reshape, Flatten, Squeeze, Unsqueeze and Identity share
// their input's storage; Concat copies each input's runs. nullopt for other nodes and types.
std::optional<Tensor> moved_value(const Node& node, const std::vector<Argument>& inputs) {
  if (node.num_outputs() != 1 || inputs.empty() || !inputs[0].is_tensor()) return std::nullopt;
  const TensorType& out = node.output(0)->tensor_type();
  auto plain_bytes = [](const Tensor& t) {
    return t.dtype() != DType::kString &&
           t.nbytes() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
  };
  switch (node.kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: {
      const Tensor& in = inputs[0].tensor();
      if (in.dtype() != out.dtype || in.numel() != out.shape().numel()) return std::nullopt;
      return in.reshaped(out.shape());
    }
    case OpKind::kConcat: {
      const int rank = out.rank();
      int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      int64_t outer = 1;
      for (int i = 0; i < axis; ++i) outer *= out.shape()[i];
      int64_t along = 0;  // the inputs' extent along the axis, together
      for (const Argument& a : inputs) {
        if (!a.is_tensor() || a.tensor().dtype() != out.dtype ||
            a.tensor().shape().rank() != rank || !plain_bytes(a.tensor())) {
          return std::nullopt;
        }
        for (int i = 0; i < rank; ++i) {
          if (i != axis && a.tensor().shape()[i] != out.shape()[i]) return std::nullopt;
        }
        along += a.tensor().shape()[static_cast<int>(axis)];
      }
      if (along != out.shape()[static_cast<int>(axis)]) return std::nullopt;
      // Every byte of the result is one of the inputs': no zeroing pass first.
      Result<Tensor> allocated = Tensor::allocate_uninitialized(out.dtype, out.shape());
      if (!allocated.ok()) return std::nullopt;
      Tensor result = std::move(allocated).value();
      if (!plain_bytes(result)) return std::nullopt;
      auto* to = static_cast<uint8_t*>(result.raw_data());
      for (int64_t o = 0; o < outer; ++o) {
        for (const Argument& a : inputs) {
          const Tensor& t = a.tensor();
          const size_t run = outer > 0 ? t.nbytes() / static_cast<size_t>(outer) : 0;
          std::memcpy(to, static_cast<const uint8_t*>(t.raw_data()) + o * run, run);
          to += run;
        }
      }
      return result;
    }
    default: return std::nullopt;
  }
}

class ConstantFolding final : public Pass {
 public:
  ConstantFolding(int64_t max_elements, bool quantized_weights)
      : max_elements_(max_elements), quantized_weights_(quantized_weights) {}
  std::string_view name() const override { return "constant_folding"; }

  Result<bool> run(Graph& graph) override {
    bool changed = false;
    std::vector<Node*> order;
    for (auto& node : graph.nodes()) order.push_back(node.get());
    for (Node* node : order) {
      for (Graph* sub : node->op().subgraphs()) {
        KILN_ASSIGN_OR_RETURN(bool sub_changed, run(*sub));
        changed |= sub_changed;
      }
      KILN_ASSIGN_OR_RETURN(bool folded, fold(graph, node));
      changed |= folded;
    }
    return changed;
  }

 private:
  Result<bool> fold(Graph& graph, Node* node) {
    if (node->kind() == OpKind::kConstant || is_random(node->kind())) return false;
    if (!quantized_weights_ && is_quantized_weight(*node)) return false;
    if (node->kind() == OpKind::kShape || node->kind() == OpKind::kSize) {
      std::optional<Tensor> value = static_shape_value(*node);
      if (value) return replace(graph, node, {Argument(std::move(*value))});
    }
    if (!node->op().subgraphs().empty() || node->num_outputs() == 0) return false;
    std::vector<Argument> inputs;
    for (const Value* in : node->inputs()) {
      const Tensor* c = in ? in->constant_value() : nullptr;
      if (in != nullptr && c == nullptr) return false;
      inputs.push_back(c ? Argument(*c) : Argument());
    }
    for (const Value* out : node->outputs()) {
      if (!out->type().is_tensor() || !out->tensor_type().is_static()) return false;
      if (out->tensor_type().shape().numel() > max_elements_) return false;
    }
    std::vector<const Argument*> args;
    for (size_t i = 0; i < inputs.size(); ++i)
      args.push_back(node->input(static_cast<int>(i)) ? &inputs[i] : nullptr);
    if (std::optional<Tensor> moved = moved_value(*node, inputs)) {
      return replace(graph, node, {Argument(std::move(*moved))});
    }
    ref::Interpreter interpreter;
    Result<std::vector<Argument>> outputs = interpreter.evaluate(*node, std::move(args));
    // A node that fails here fails the same way at run time; leave it for the runtime's message.
    if (!outputs.ok()) return false;
    return replace(graph, node, std::move(outputs).value());
  }

  bool replace(Graph& graph, Node* node, std::vector<Argument> values) {
    bool changed = false;
    for (int i = 0; i < node->num_outputs(); ++i) {
      Value* out = node->output(i);
      const Argument& v = values[static_cast<size_t>(i)];
      if (!v.is_tensor() || (out->uses().empty() && !is_graph_output(out))) continue;
      Value* c = graph.add_constant(v.tensor(), graph.unique_name(out->name() + "_folded"), node);
      c->producer()->set_name(node->name());
      if (forward_output(node, i, c)) {
        changed = true;
      } else {
        graph.erase(c->producer());
      }
    }
    return changed;
  }

  int64_t max_elements_;
  bool quantized_weights_;
};

}  // namespace

std::unique_ptr<Pass> make_constant_folding(int64_t max_elements, bool quantized_weights) {
  return std::make_unique<ConstantFolding>(max_elements, quantized_weights);
}

}  // namespace kiln::compiler
