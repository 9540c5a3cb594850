// SPDX-License-Identifier: Apache-2.0
// Which squeeze-and-excitation gates a 1x1 convolution absorbs into its weights.
#include "compiler/targets/cpu/conv_gate.h"

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

bool is_static_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static() &&
         v->tensor_type().dtype == DType::kF32;
}

}  // namespace

std::optional<ConvGate> absorbed_gate(const Node& conv) {
  if (conv.kind() != OpKind::kConv || !conv.has_input(0)) return std::nullopt;
  const Value* y = conv.input(0);
  const Node* mul = y->producer();
  if (mul == nullptr || mul->kind() != OpKind::kMul || mul->num_inputs() != 2 ||
      mul->graph() != conv.graph() || y->uses().size() != 1 || y->uses()[0].index != 0 ||
      is_graph_output(y)) {
    return std::nullopt;
  }
  std::optional<ConvSetup> s = conv_setup(conv);
  if (!s || s->weights_const == nullptr || s->weights_const->dtype() != DType::kF32 ||
      s->weights.size() != 4 || s->weights[2] != 1 || s->weights[3] != 1 || s->strides[0] != 1 ||
      s->strides[1] != 1 || s->pad_begin[0] != 0 || s->pad_begin[1] != 0 || s->pad_end[0] != 0 ||
      s->pad_end[1] != 0) {
    return std::nullopt;
  }
  if (!is_static_f32(y) || !is_static_f32(mul->input(0)) || !is_static_f32(mul->input(1))) {
    return std::nullopt;
  }
  const Shape& shape = y->tensor_type().shape();
  if (shape.rank() != 4 || shape[0] != 1 || 2 * s->weights[0] > shape[2] * shape[3]) {
    return std::nullopt;
  }
  for (int i = 0; i < 2; ++i) {
    const Value* x = mul->input(i);
    const Value* gate = mul->input(1 - i);
    if (x->tensor_type().shape() == shape &&
        gate->tensor_type().shape() == Shape{1, shape[1], 1, 1}) {
      return ConvGate{mul, x, gate};
    }
  }
  return std::nullopt;
}

bool is_absorbed_gate(const Node& mul) {
  if (mul.kind() != OpKind::kMul || mul.num_outputs() != 1) return false;
  const Value* y = mul.output(0);
  if (y->uses().size() != 1) return false;
  std::optional<ConvGate> gate = absorbed_gate(*y->uses()[0].node);
  return gate && gate->mul == &mul;
}

}  // namespace kiln::compiler::cpu
