// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the reduce op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/reduce.h"

#include <cstdint>

#include "compiler/onnx/node_importer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

// ReduceSum since opset 13, and the other Reduce* ops since 18, take axes as an optional second
// input: a constant one becomes the `axes` attribute, any other stays an input.
template <class R>
Status import_axes_input(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(R::kKind));
  R op = generic.as<R>();
  std::vector<Value*> inputs = {ni.has_input(0) ? ni.input(0) : nullptr};
  if (ni.has_input(1)) {
    if (const Tensor* c = ni.input(1)->constant_value()) {
      if (op.axes) return ni.error("expected axes as an attribute or as an input, got both");
      op.axes = tensor_to_ints(*c);
    } else {
      inputs.push_back(ni.input(1));
    }
  }
  return ni.emit(op, std::move(inputs)).status();
}

// TopK before opset 10 takes k as an attribute; it becomes a constant [1] input.
Status import_topk_v1(NodeImporter& ni) {
  static constexpr std::string_view kIgnore[] = {"k"};
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kTopK, kIgnore));
  std::optional<int64_t> k = ni.int_attr("k");
  if (!k) return ni.error("expected the attribute k, got none");
  Value* kv = ni.constant(Tensor::from_vector(std::vector<int64_t>{*k}));
  return ni.emit(std::move(op), {ni.has_input(0) ? ni.input(0) : nullptr, kv}).status();
}

}  // namespace

std::vector<OpsetImporter> reduce_importers() {
  return {
      {"", "ReduceSum", 13, kLatestOpset, import_axes_input<ops::ReduceSum>},
      {"", "ReduceL1", 18, kLatestOpset, import_axes_input<ops::ReduceL1>},
      {"", "ReduceL2", 18, kLatestOpset, import_axes_input<ops::ReduceL2>},
      {"", "ReduceLogSum", 18, kLatestOpset, import_axes_input<ops::ReduceLogSum>},
      {"", "ReduceLogSumExp", 18, kLatestOpset, import_axes_input<ops::ReduceLogSumExp>},
      {"", "ReduceMax", 18, kLatestOpset, import_axes_input<ops::ReduceMax>},
      {"", "ReduceMean", 18, kLatestOpset, import_axes_input<ops::ReduceMean>},
      {"", "ReduceMin", 18, kLatestOpset, import_axes_input<ops::ReduceMin>},
      {"", "ReduceProd", 18, kLatestOpset, import_axes_input<ops::ReduceProd>},
      {"", "ReduceSumSquare", 18, kLatestOpset, import_axes_input<ops::ReduceSumSquare>},
      {"", "TopK", 1, 9, import_topk_v1},
  };
}

}  // namespace kiln::compiler
