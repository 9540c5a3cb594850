// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the attention op family: Attention's older opsets and the ai.onnx.preview
// FlexAttention.
#include "compiler/ops/attention.h"

#include <string_view>

#include "compiler/onnx/node_importer.h"
#include "compiler/onnx/tensor_proto.h"

namespace kiln::compiler {

namespace {

// Attention 23-24: no sliding window (opset 25), and at 23 no nonpad_kv_seqlen input.
Status import_attention_v23(NodeImporter& ni) {
  for (std::string_view name : {"left_window_size", "right_window_size"}) {
    if (ni.has_attr(name)) {
      return ni.errorf("attribute \"{}\" needs opset 25, the model imports {}", name, ni.opset());
    }
  }
  if (ni.opset() < 24 && ni.num_inputs() > 6) {
    return ni.errorf("input 6 (nonpad_kv_seqlen) needs opset 24, the model imports {}", ni.opset());
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kAttention));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// FlexAttention lives in ai.onnx.preview. Its modifier graphs take the scores (or probabilities)
// in the softmax's element type; that type is given to graphs that leave their input untyped.
Status import_flex_attention(NodeImporter& ni) {
  if (!ni.has_input(0) || !ni.input(0)->type().is_tensor()) {
    return ni.error("input 0 (Q) must be a tensor");
  }
  DType scores = ni.input(0)->tensor_type().dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  if (std::optional<int64_t> precision = ni.int_attr("softmax_precision")) {
    std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(*precision));
    if (!d || !dtype_is_float(*d)) {
      return ni.errorf("softmax_precision {} is not a float element type", *precision);
    }
    scores = *d;
  }
  const std::vector<ValueType> mod_inputs = {TensorType(scores, std::vector<Dim>(4))};
  const SubgraphInputTypes subgraph_inputs = {{"score_mod", mod_inputs}, {"prob_mod", mod_inputs}};
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kFlexAttention, {}, subgraph_inputs));
  return ni.emit(std::move(op), ni.inputs()).status();
}

}  // namespace

std::vector<OpsetImporter> attention_importers() {
  return {
      {"", "Attention", 23, 24, import_attention_v23},
      {"ai.onnx.preview", "FlexAttention", 1, kLatestOpset, import_flex_attention},
  };
}

}  // namespace kiln::compiler
