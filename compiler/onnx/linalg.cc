// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the linalg op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/linalg.h"

#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

namespace {

// Gemm before opset 7: `broadcast` says whether C may broadcast; without it C must already be
// [M, N], which the unidirectional broadcast kiln's Gemm allows includes.
Status import_gemm_v1(NodeImporter& ni) {
  static constexpr std::string_view kIgnore[] = {"broadcast"};
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kGemm, kIgnore));
  if (!ni.has_input(2)) return ni.error("expected the input C before opset 11, got none");
  KILN_ASSIGN_OR_RETURN(Node * node, ni.emit(std::move(op), ni.inputs()));
  if (ni.int_attr("broadcast").value_or(0) == 0) {
    const TensorType& c = ni.input(2)->tensor_type();
    const TensorType& y = node->output(0)->tensor_type();
    if (c.has_rank() && y.has_rank() && c.is_static() && y.is_static() &&
        !(c.shape() == y.shape())) {
      return ni.errorf("expected C of shape {} without broadcast=1, got {}", y.to_string(),
                       c.to_string());
    }
  }
  return Status();
}

}  // namespace

std::vector<OpsetImporter> linalg_importers() {
  return {
      {"", "Gemm", 1, 6, import_gemm_v1},
  };
}

}  // namespace kiln::compiler
