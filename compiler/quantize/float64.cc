// SPDX-License-Identifier: Apache-2.0
// float64 conversion: every f32, f16 and bf16 tensor of a graph becomes f64, for a float64
// reference run on ref.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/infer.h"
#include "compiler/quantize/quantize.h"

namespace kiln::compiler {

namespace {

// The element types widened to f64: every f64 value is exact in double.
bool widens(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

Tensor to_f64(const Tensor& t) {
  Tensor out(DType::kF64, t.shape());
  double* dst = out.data<double>();
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      const T* src = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i)
        dst[i] = static_cast<double>(static_cast<float>(src[i]));
    } else {
      KILN_CHECK(false, "to_f64: a widened type expected");
    }
  });
  return out;
}

ValueType widened(const ValueType& type) {
  switch (type.kind()) {
    case ValueType::Kind::kTensor: {
      TensorType t = type.tensor();
      if (widens(t.dtype)) t.dtype = DType::kF64;
      return ValueType(std::move(t));
    }
    case ValueType::Kind::kSequence: return ValueType::sequence(widened(type.element()));
    case ValueType::Kind::kOptional: return ValueType::optional(widened(type.element()));
  }
  return type;
}

// Turns the element-type attributes that make f32, f16 or bf16 (Cast's `to`, random ops' `dtype`,
// Attention's `softmax_precision`, ...) into `to` (f64, or f32 for the nodes that stay in f32), and
// such tensor attributes (ConstantOfShape's `value`) into their f64 forms.
class AttributeWidener final : public AttrVisitor {
 public:
  explicit AttributeWidener(DType to) : to_(to) {}

  void visit(std::string_view, AttrRef field) override {
    if (auto* d = std::get_if<DType*>(&field); d && widens(**d)) **d = to_;
    if (auto* d = std::get_if<std::optional<DType>*>(&field); d && **d && widens(***d)) {
      **d = to_;
    }
    if (auto* t = std::get_if<Tensor*>(&field); t && (*t)->defined() && widens((*t)->dtype())) {
      **t = to_f64(**t);
    }
  }

 private:
  DType to_;
};

// Constant's float forms (an f32, f16 or bf16 tensor, value_float, value_floats) as one f64 tensor
// attribute.
std::optional<Op> widened_constant(const ops::Constant& c) {
  ops::Constant out;
  if (c.value.defined() && widens(c.value.dtype())) {
    out.value = to_f64(c.value);
  } else if (c.value_float) {
    out.value = Tensor::scalar<double>(*c.value_float);
  } else if (c.value_floats) {
    out.value =
        Tensor::from_vector(std::vector<double>(c.value_floats->begin(), c.value_floats->end()));
  } else {
    return std::nullopt;
  }
  return Op(std::move(out));
}

// Whether input `index` of an op of `kind` must stay f32 whatever the data type (Resize's and
// Upsample's scales; NonMaxSuppression's boxes, scores and thresholds).
bool stays_f32(OpKind kind, int index) {
  return (kind == OpKind::kResize && index == 2) || (kind == OpKind::kUpsample && index == 1) ||
         (kind == OpKind::kNonMaxSuppression && index != 2);
}

// The quantization ops, whose float inputs ONNX allows in f32, f16 and bf16 but not f64: they stay
// in f32 (which holds every f16 and bf16 value), their float inputs cast to f32 and their float
// outputs cast to f64. Their rounding to integers is their meaning, which float64 does not change.
bool computes_in_f32(OpKind kind) {
  return kind == OpKind::kQuantizeLinear || kind == OpKind::kDequantizeLinear ||
         kind == OpKind::kDynamicQuantizeLinear || kind == OpKind::kQLinearConv ||
         kind == OpKind::kQLinearMatMul;
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

// Widens `graph` and its subgraphs. `in_branch`: inside an If branch, where a node that does not
// type-check is left to fail at run time (see type_refinement).
Status widen(Graph& graph, bool in_branch) {
  if (graph.parent() != nullptr) {
    for (Value* in : graph.inputs()) in->set_type(widened(in->type()));
  }
  std::vector<Node*> order;
  for (auto& node : graph.nodes()) order.push_back(node.get());
  for (size_t n = 0; n < order.size(); ++n) {
    Node* node = order[n];
    const bool in_f32 = computes_in_f32(node->kind());
    if (const auto* c = node->op().get_if<ops::Constant>()) {
      if (std::optional<Op> op = widened_constant(*c)) node->set_op(std::move(*op));
    } else if (const auto* fill = node->op().get_if<ops::ConstantOfShape>();
               fill != nullptr && !fill->value.defined()) {
      ops::ConstantOfShape zeros;  // ONNX's default value is an f32 zero
      zeros.value = Tensor::from_vector(std::vector<double>{0.0});
      node->set_op(Op(std::move(zeros)));
    } else {
      AttributeWidener widener(in_f32 ? DType::kF32 : DType::kF64);
      node->set_op(node->op().with_attributes(widener));
    }
    for (Graph* sub : node->op().subgraphs()) {
      KILN_RETURN_IF_ERROR(widen(*sub, in_branch || node->kind() == OpKind::kIf));
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      Value* in = node->input(i);
      if (in == nullptr || !(in_f32 || stays_f32(node->kind(), i)) || !in->type().is_tensor() ||
          in->tensor_type().dtype != DType::kF64) {
        continue;
      }
      node->set_input(i, cast(graph, in, DType::kF32, node));
    }
    std::vector<ValueType> widened_types;
    for (Value* out : node->outputs()) widened_types.push_back(widened(out->type()));
    Status inferred = infer_node(*node);
    if (!inferred.ok() && !in_branch) {
      return inferred.with_context("float64 conversion");
    }
    for (int i = 0; i < node->num_outputs(); ++i) {
      Value* out = node->output(i);
      const ValueType& want = widened_types[static_cast<size_t>(i)];
      // Keep the (more specific) widened import type unless inference found another dtype.
      const bool same_dtype = !out->type().is_tensor() || !want.is_tensor() ||
                              out->tensor_type().dtype == want.tensor().dtype;
      if (!inferred.ok() || same_dtype) out->set_type(want);
      if (!in_f32 || !inferred.ok() || !out->type().is_tensor() ||
          out->tensor_type().dtype != DType::kF32) {
        continue;
      }
      // Its readers (and the graph's outputs) take it widened.
      std::vector<Use> uses = out->uses();
      Value* wide = cast(graph, out, DType::kF64, n + 1 < order.size() ? order[n + 1] : nullptr);
      for (const Use& use : uses) use.node->set_input(use.index, wide);
      for (size_t k = 0; k < graph.outputs().size(); ++k) {
        if (graph.outputs()[k] != out) continue;
        graph.set_output(static_cast<int>(k), wide);
        // Outputs keep their names, which callers read them by.
        std::string name = out->name();
        out->set_name(wide->name());
        wide->set_name(std::move(name));
      }
    }
  }
  return Status();
}

}  // namespace

Status convert_to_f64(Graph& graph) {
  Node* first = graph.nodes().empty() ? nullptr : graph.nodes().front().get();
  for (Value* in : graph.inputs()) {
    if (!in->type().is_tensor() || !widens(in->tensor_type().dtype)) continue;
    std::vector<Use> uses = in->uses();
    Value* wide = cast(graph, in, DType::kF64, first);
    for (const Use& use : uses) use.node->set_input(use.index, wide);
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      if (graph.outputs()[i] == in) graph.set_output(static_cast<int>(i), wide);
    }
  }
  return widen(graph, /*in_branch=*/false);
}

}  // namespace kiln::compiler
