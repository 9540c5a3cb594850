// SPDX-License-Identifier: Apache-2.0
// Float16 widening: a graph that computes in float16 (a model converted with onnxconverter-common's
// convert_float_to_float16) computes in float32 instead, for a target with no float16 kernels
// (the cpu target on processors without AVX512-FP16), as ONNX Runtime's CPU provider runs the ops
// it has no float16 kernel for. Constants are converted once; the converter's Casts at the graph's
// edges become Casts to the same type (algebraic simplification removes them); float16 graph
// inputs and outputs keep their type through a Cast at the edge. Values are not rounded to
// float16 between ops, so results are closer to the float32 model's than float16 arithmetic is.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {

namespace {

Tensor to_f32(const Tensor& t) {
  Tensor out(DType::kF32, t.shape());
  const Half* src = t.data<Half>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<float>(src[i]);
  return out;
}

bool is_f16(const ValueType& type) {
  return type.is_tensor() && type.tensor().dtype == DType::kF16;
}

ValueType widened(const ValueType& type) {
  switch (type.kind()) {
    case ValueType::Kind::kTensor: {
      TensorType t = type.tensor();
      if (t.dtype == DType::kF16) t.dtype = DType::kF32;
      return ValueType(std::move(t));
    }
    case ValueType::Kind::kSequence: return ValueType::sequence(widened(type.element()));
    case ValueType::Kind::kOptional: return ValueType::optional(widened(type.element()));
  }
  return type;
}

// Turns the float16 element-type attributes (Cast's `to`, random ops' `dtype`, ...) and tensor
// attributes (Constant's and ConstantOfShape's `value`) into float32 ones.
class AttributeWidener final : public AttrVisitor {
 public:
  void visit(std::string_view, AttrRef field) override {
    if (auto* d = std::get_if<DType*>(&field); d && **d == DType::kF16) **d = DType::kF32;
    if (auto* d = std::get_if<std::optional<DType>*>(&field); d && **d == DType::kF16) {
      **d = DType::kF32;
    }
    if (auto* t = std::get_if<Tensor*>(&field);
        t && (*t)->defined() && (*t)->dtype() == DType::kF16) {
      **t = to_f32(**t);
    }
  }
};

// Whether `kind` does the work of a float16 model: what makes widening worth it.
bool is_compute(OpKind kind) {
  switch (kind) {
    case OpKind::kConv:
    case OpKind::kConvTranspose:
    case OpKind::kMatMul:
    case OpKind::kGemm:
    case OpKind::kLSTM:
    case OpKind::kGRU:
    case OpKind::kRNN: return true;
    default: return false;
  }
}

// Whether `graph` (or a graph in it) runs a compute op on float16 values.
bool computes_in_f16(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    for (const Graph* sub : node->op().subgraphs()) {
      if (computes_in_f16(*sub)) return true;
    }
    if (is_compute(node->kind()) && !node->outputs().empty() && is_f16(node->output(0)->type())) {
      return true;
    }
  }
  return false;
}

void widen(Graph& graph) {
  if (graph.parent() != nullptr) {
    for (Value* in : graph.inputs()) in->set_type(widened(in->type()));
  }
  for (auto& node : graph.nodes()) {
    AttributeWidener widener;
    node->set_op(node->op().with_attributes(widener));
    for (Graph* sub : node->op().subgraphs()) widen(*sub);
    for (Value* out : node->outputs()) out->set_type(widened(out->type()));
  }
}

Value* cast(Graph& graph, Value* v, DType to, Node* before) {
  ops::Cast c;
  c.to = to;
  Node* node = graph.add_node(
      Op(c), {v}, 1, graph.unique_name(fmt::format("{}_{}", v->name(), dtype_name(to))), before);
  TensorType type = v->tensor_type();
  type.dtype = to;
  node->output(0)->set_type(type);
  return node->output(0);
}

class Float16Widening final : public Pass {
 public:
  std::string_view name() const override { return "float16_widening"; }
  Result<bool> run(Graph& graph) override {
    if (!computes_in_f16(graph)) return false;
    // The graph's float16 outputs are found again after widening, to be narrowed at the edge.
    std::vector<bool> narrow;
    for (const Value* out : graph.outputs()) narrow.push_back(is_f16(out->type()));
    widen(graph);
    Node* first = graph.nodes().empty() ? nullptr : graph.nodes().front().get();
    for (Value* in : graph.inputs()) {
      if (!is_f16(in->type())) continue;
      std::vector<Use> uses = in->uses();
      Value* wide = cast(graph, in, DType::kF32, first);
      for (const Use& use : uses) use.node->set_input(use.index, wide);
      for (size_t i = 0; i < graph.outputs().size(); ++i) {
        if (graph.outputs()[i] == in) graph.set_output(static_cast<int>(i), wide);
      }
    }
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      if (!narrow[i]) continue;
      Value* out = graph.outputs()[i];
      Value* narrowed = cast(graph, out, DType::kF16, nullptr);
      // The output keeps its name: the widened value takes the Cast's.
      const std::string name = out->name();
      out->set_name(narrowed->name());
      narrowed->set_name(name);
      graph.set_output(static_cast<int>(i), narrowed);
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_float16_widening() {
  return std::make_unique<Float16Widening>();
}

}  // namespace kiln::compiler
