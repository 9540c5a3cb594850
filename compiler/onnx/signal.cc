// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the signal op family: versions whose semantics differ from kiln's op.
#include "compiler/onnx/node_importer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/signal.h"

namespace kiln::compiler {

namespace {

// DFT 20: the axis is an optional input (default -2); a constant one becomes the attribute.
Status import_dft_20(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kDFT));
  ops::DFT op = generic.as<ops::DFT>();
  op.axis = -2;
  std::vector<Value*> inputs = {ni.has_input(0) ? ni.input(0) : nullptr,
                                ni.has_input(1) ? ni.input(1) : nullptr};
  if (ni.has_input(2)) {
    const Tensor* axis = ni.input(2)->constant_value();
    if (axis == nullptr) {
      inputs.push_back(ni.input(2));
    } else {
      const std::vector<int64_t> v = tensor_to_ints(*axis);
      if (v.size() != 1) return ni.errorf("expected one axis, got {}", v.size());
      op.axis = v[0];
    }
  }
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  return ni.emit(Op(std::move(op)), std::move(inputs)).status();
}

}  // namespace

std::vector<OpsetImporter> signal_importers() {
  return {
      {"", "DFT", 20, kLatestOpset, import_dft_20},
  };
}

}  // namespace kiln::compiler
