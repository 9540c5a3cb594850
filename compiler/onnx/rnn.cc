// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the rnn op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/rnn.h"

#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

namespace {

constexpr std::string_view kOutputSequence[] = {"output_sequence"};

// Opsets 1 to 6 had `output_sequence`, which only said whether Y was wanted; kiln computes Y
// whenever the node names it.
Status import_with_output_sequence(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind, kOutputSequence));
  return ni.emit(std::move(op), ni.inputs()).status();
}

}  // namespace

std::vector<OpsetImporter> rnn_importers() {
  return {
      {"", "RNN", 1, 6,
       [](NodeImporter& ni) { return import_with_output_sequence(ni, OpKind::kRNN); }},
      {"", "GRU", 1, 6,
       [](NodeImporter& ni) { return import_with_output_sequence(ni, OpKind::kGRU); }},
      {"", "LSTM", 1, 6,
       [](NodeImporter& ni) { return import_with_output_sequence(ni, OpKind::kLSTM); }},
  };
}

}  // namespace kiln::compiler
