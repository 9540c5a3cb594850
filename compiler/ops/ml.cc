// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the ml op family (the ai.onnx.ml domain).
#include "compiler/ops/ml.h"

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/ml_util.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::LabelEncoder& op, const InferContext& ctx) {
  Result<LabelTable> table = label_table(op);
  if (!table.ok()) return ctx.error(table.status().message());
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  TensorType out = ctx.input(0);
  if (out.dtype != table->keys.dtype()) {
    return ctx.errorf("the keys are {}, but the input is {}", dtype_name(table->keys.dtype()),
                      out.to_string());
  }
  out.dtype = table->values.dtype();
  return std::vector<ValueType>{std::move(out)};
}

template <>
InferResult infer_op(const ops::TreeEnsemble& op, const InferContext& ctx) {
  const size_t nodes = op.nodes_featureids.size();
  const size_t leaves = op.leaf_targetids.size();
  const bool lists_agree =
      op.nodes_truenodeids.size() == nodes && op.nodes_falsenodeids.size() == nodes &&
      op.nodes_trueleafs.size() == nodes && op.nodes_falseleafs.size() == nodes &&
      op.nodes_modes.numel() == static_cast<int64_t>(nodes) &&
      op.nodes_splits.numel() == static_cast<int64_t>(nodes) &&
      (op.nodes_missing_value_tracks_true.empty() ||
       op.nodes_missing_value_tracks_true.size() == nodes) &&
      op.leaf_weights.numel() == static_cast<int64_t>(leaves);
  if (!lists_agree) {
    return ctx.error(
        "expected every nodes_* attribute to hold one value per node, and the leaf_* "
        "attributes one per leaf");
  }
  if (op.nodes_modes.dtype() != DType::kU8) {
    return ctx.errorf("expected u8 nodes_modes, got {}", dtype_name(op.nodes_modes.dtype()));
  }
  if (!op.n_targets || *op.n_targets < 1) return ctx.error("expected the attribute n_targets >= 1");
  if (op.tree_roots.empty()) return ctx.error("expected at least one tree root");
  if (op.aggregate_function < 0 || op.aggregate_function > 3) {
    return ctx.errorf("expected aggregate_function 0 to 3, got {}", op.aggregate_function);
  }
  if (op.post_transform < 0 || op.post_transform > 4) {
    return ctx.errorf("expected post_transform 0 to 4, got {}", op.post_transform);
  }
  const auto* modes = op.nodes_modes.data<uint8_t>();
  int64_t members = 0;
  for (size_t i = 0; i < nodes; ++i) {
    if (modes[i] > 6) return ctx.errorf("node {} has mode {}, expected 0 to 6", i, modes[i]);
    members += modes[i] == 6;
    for (bool side : {true, false}) {
      const int64_t next = side ? op.nodes_truenodeids[i] : op.nodes_falsenodeids[i];
      const bool leaf = (side ? op.nodes_trueleafs[i] : op.nodes_falseleafs[i]) != 0;
      if (next < 0 || static_cast<size_t>(next) >= (leaf ? leaves : nodes)) {
        return ctx.errorf("node {} leads to {} {}, out of range", i, leaf ? "leaf" : "node", next);
      }
    }
  }
  for (int64_t t : op.leaf_targetids) {
    if (t < 0 || t >= *op.n_targets) return ctx.errorf("leaf target {} is out of range", t);
  }
  for (int64_t r : op.tree_roots) {
    if (r < 0 || static_cast<size_t>(r) >= nodes)
      return ctx.errorf("tree root {} is out of range", r);
  }
  if (members > 0) {
    int64_t sets = 0;
    const std::vector<double> values = op.membership_values.defined()
                                           ? tensor_to_doubles(op.membership_values)
                                           : std::vector<double>();
    for (double v : values) sets += v != v;
    if (sets != members) {
      return ctx.errorf("expected {} NaN-ended sets in membership_values, got {}", members, sets);
    }
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0, 2));
  const TensorType& x = ctx.input(0);
  if (!dtype_is_float(x.dtype)) return ctx.errorf("expected a float input, got {}", x.to_string());
  const Dim rows = x.has_rank() ? (*x.dims)[0] : Dim();
  return std::vector<ValueType>{TensorType(x.dtype, {rows, Dim(*op.n_targets)})};
}

}  // namespace kiln::compiler
