// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the ml op family: the ai.onnx.ml domain's ops kiln runs as its own ops.
#include "compiler/ops/ml.h"

#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

namespace {

// The attributes map onto the op's fields by name.
Status import_by_name(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind));
  return ni.emit(std::move(op), ni.inputs()).status();
}

}  // namespace

std::vector<OpsetImporter> ml_importers() {
  return {
      {"ai.onnx.ml", "LabelEncoder", 2, kLatestOpset,
       [](NodeImporter& ni) { return import_by_name(ni, OpKind::kLabelEncoder); }},
      {"ai.onnx.ml", "TreeEnsemble", 5, kLatestOpset,
       [](NodeImporter& ni) { return import_by_name(ni, OpKind::kTreeEnsemble); }},
  };
}

}  // namespace kiln::compiler
