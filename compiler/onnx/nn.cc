// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the nn op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/nn.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include "compiler/onnx/node_importer.h"
#include "compiler/ops/elementwise.h"
#include "compiler/ops/indexing.h"
#include "compiler/ops/shape.h"

namespace kiln::compiler {

namespace {

constexpr std::string_view kConsumedInputs[] = {"consumed_inputs"};
constexpr std::string_view kLegacyBatchNorm[] = {"consumed_inputs", "is_test", "spatial"};
constexpr std::string_view kLegacyDropout[] = {"consumed_inputs", "is_test", "ratio"};

// Opsets 1 to 5 marked in-place inputs with `consumed_inputs`, which has no meaning for kiln.
Status import_ignoring_consumed_inputs(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind, kConsumedInputs));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// An unimplemented error naming the node.
Status unsupported(const NodeImporter& ni, std::string_view what) {
  return unimplemented_error(std::string(ni.error(what).message()));
}

// Binds the node's ONNX output i to `value`, naming the value after it.
void bind_named(NodeImporter& ni, int i, Value* value) {
  if (!ni.proto().output(i).empty()) value->set_name(ni.proto().output(i));
  ni.bind_output(i, value);
}

// Opsets 1 to 13: training is implied by the extra outputs (opsets 1 to 6: and is_test=0); the
// saved_mean/saved_var outputs of training are not supported. Opsets before 9 also had
// `spatial`, of which only the default (1) is supported.
Status import_batch_norm_legacy(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kBatchNormalization, kLegacyBatchNorm));
  ops::BatchNormalization bn = op.as<ops::BatchNormalization>();
  if (ni.int_attr("spatial").value_or(1) != 1) {
    return unsupported(ni, "spatial=0 (per-activation statistics) is not supported");
  }
  const bool is_test = ni.opset() < 7 && ni.int_attr("is_test").value_or(0) != 0;
  int used = 0;
  for (int i = 1; i < ni.num_outputs(); ++i) {
    if (!ni.proto().output(i).empty()) used = i;
  }
  if (used > 2) {
    return unsupported(ni, "the saved_mean and saved_var outputs are not supported");
  }
  bn.training_mode = !is_test && used > 0 ? 1 : 0;
  return ni.emit(bn, ni.inputs()).status();
}

// Opsets 1 to 11: ratio is an attribute, and only opsets before 7 can train (is_test=0). The mask
// output had the data's element type before opset 10.
Status import_dropout_legacy(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kDropout, kLegacyDropout));
  if (!ni.has_input(0)) return ni.error("expected the data input");
  const bool training = ni.opset() < 7 && ni.int_attr("is_test").value_or(0) == 0;
  Value* ratio = ni.constant(Tensor::scalar(ni.float_attr("ratio").value_or(0.5F)));
  Value* mode = ni.constant(Tensor::scalar(training));
  std::vector<Value*> inputs{ni.input(0), ratio, mode};
  const bool typed_mask = ni.opset() < 10 && ni.num_outputs() > 1 && !ni.proto().output(1).empty();
  if (!typed_mask) return ni.emit(op, std::move(inputs)).status();
  KILN_ASSIGN_OR_RETURN(Node * node, ni.emit_internal(op, std::move(inputs), 2));
  bind_named(ni, 0, node->output(0));
  ops::Cast cast;
  cast.to = node->output(0)->tensor_type().dtype;
  KILN_ASSIGN_OR_RETURN(Node * mask, ni.emit_internal(cast, {node->output(1)}));
  bind_named(ni, 1, mask->output(0));
  return Status();
}

// Softmax, LogSoftmax and Hardmax before opset 13 work on the input coerced to 2-D at `axis`
// (default 1): over every dim from `axis` on. With `axis` the last dim that is the same as the
// opset-13 op; otherwise the input is flattened, normalized along dim 1 and reshaped back.
template <class T>
Status import_softmax_legacy(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(T::kKind, {}));
  T attrs = op.as<T>();
  attrs.axis = ni.int_attr("axis").value_or(1);
  if (ni.num_inputs() != 1 || !ni.has_input(0)) {
    return ni.errorf("expected 1 input, got {}", ni.num_inputs());
  }
  Value* x = ni.input(0);
  if (x->type().is_tensor() && x->tensor_type().has_rank()) {
    const int rank = x->tensor_type().rank();
    if (attrs.axis < -rank || attrs.axis >= std::max(rank, 1)) {
      return ni.errorf("axis {} is out of range for input {}", attrs.axis,
                       x->tensor_type().to_string());
    }
    const int64_t axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
    if (axis >= rank - 1) return ni.emit(attrs, {x}).status();
  }
  ops::Flatten flatten;
  flatten.axis = attrs.axis;
  KILN_ASSIGN_OR_RETURN(Node * flat, ni.emit_internal(flatten, {x}));
  T inner = attrs;
  inner.axis = 1;
  KILN_ASSIGN_OR_RETURN(Node * normalized, ni.emit_internal(inner, {flat->output(0)}));
  KILN_ASSIGN_OR_RETURN(Node * shape, ni.emit_internal(ops::Shape{}, {x}));
  return ni.emit(ops::Reshape{}, {normalized->output(0), shape->output(0)}).status();
}

// LpPool and GlobalLpPool at opset 1 took p as a float. make_op() fills a field from an
// attribute of its name even when the name is in its ignore list, so these ops are built here.
Result<int64_t> float_p(const NodeImporter& ni) {
  if (!ni.has_attr("p")) return int64_t{2};
  std::optional<float> p = ni.float_attr("p");
  if (!p || *p < 1 || *p != static_cast<float>(static_cast<int64_t>(*p))) {
    return ni.error("expected attribute \"p\" to be a float with a positive integer value");
  }
  return static_cast<int64_t>(*p);
}

Status check_attributes(const NodeImporter& ni, std::span<const std::string_view> known) {
  for (const onnx::AttributeProto& a : ni.proto().attribute()) {
    if (std::find(known.begin(), known.end(), a.name()) == known.end()) {
      return ni.errorf("attribute \"{}\" is not supported for {} at opset {}", a.name(),
                       ni.op_type(), ni.opset());
    }
  }
  return Status();
}

Status import_lp_pool_v1(NodeImporter& ni) {
  static constexpr std::string_view kKnown[] = {"auto_pad", "kernel_shape", "p", "pads", "strides"};
  KILN_RETURN_IF_ERROR(check_attributes(ni, kKnown));
  ops::LpPool op;
  KILN_ASSIGN_OR_RETURN(op.p, float_p(ni));
  op.auto_pad = ni.string_attr("auto_pad").value_or(op.auto_pad);
  op.kernel_shape = ni.ints_attr("kernel_shape");
  op.pads = ni.ints_attr("pads");
  op.strides = ni.ints_attr("strides");
  return ni.emit(op, ni.inputs()).status();
}

Status import_global_lp_pool_v1(NodeImporter& ni) {
  static constexpr std::string_view kKnown[] = {"p"};
  KILN_RETURN_IF_ERROR(check_attributes(ni, kKnown));
  ops::GlobalLpPool op;
  KILN_ASSIGN_OR_RETURN(op.p, float_p(ni));
  return ni.emit(op, ni.inputs()).status();
}

// Conv: `activation` is a kiln field set by fusion passes, never an ONNX attribute.
Status import_conv(NodeImporter& ni) {
  if (ni.has_attr("activation")) {
    return ni.error(
        "attribute \"activation\" is not supported for Conv (it is not an ONNX attribute)");
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kConv));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// GroupNormalization 18-20: scale and bias hold one value per group; opset 21's (kiln's) hold one
// per channel, so each is gathered out to the channels (the channel count must be static).
Status import_group_norm_v18(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kGroupNormalization, {}));
  const auto& attrs = op.as<ops::GroupNormalization>();
  if (ni.num_inputs() != 3 || !ni.has_input(0) || !ni.has_input(1) || !ni.has_input(2)) {
    return ni.errorf("expected 3 inputs (X, scale, bias), got {}", ni.num_inputs());
  }
  if (ni.has_attr("stash_type")) {
    return ni.errorf("attribute \"stash_type\" needs opset 21, the model imports {}", ni.opset());
  }
  if (!attrs.num_groups || *attrs.num_groups < 1) {
    return ni.error("the num_groups attribute must be given and >= 1");
  }
  const ValueType& xt = ni.input(0)->type();
  if (!xt.is_tensor() || !xt.tensor().has_rank() || xt.tensor().rank() < 2 ||
      !(*xt.tensor().dims)[1].known()) {
    return unsupported(ni, fmt::format("opset {} scales per group, and expanding them to the "
                                       "channels needs a static channel count, got X {}",
                                       ni.opset(), xt.to_string()));
  }
  const int64_t channels = (*xt.tensor().dims)[1].value;
  const int64_t groups = *attrs.num_groups;
  if (channels % groups != 0) {
    return ni.errorf("the {} channels do not split into {} groups", channels, groups);
  }
  std::vector<int64_t> group_of(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) group_of[static_cast<size_t>(c)] = c / (channels / groups);
  Value* index = ni.constant(Tensor::from_vector(group_of));
  std::vector<Value*> inputs = {ni.input(0)};
  for (int i = 1; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * gather, ni.emit_internal(ops::Gather{}, {ni.input(i), index}));
    inputs.push_back(gather->output(0));
  }
  return ni.emit(std::move(op), std::move(inputs)).status();
}

}  // namespace

std::vector<OpsetImporter> nn_importers() {
  return {
      {"", "Conv", 1, kLatestOpset, import_conv},
      {"", "BatchNormalization", 1, 13, import_batch_norm_legacy},
      {"", "InstanceNormalization", 1, 5,
       [](NodeImporter& ni) {
         return import_ignoring_consumed_inputs(ni, OpKind::kInstanceNormalization);
       }},
      {"", "Dropout", 1, 11, import_dropout_legacy},
      {"", "Softmax", 1, 12, import_softmax_legacy<ops::Softmax>},
      {"", "LogSoftmax", 1, 12, import_softmax_legacy<ops::LogSoftmax>},
      {"", "Hardmax", 1, 12, import_softmax_legacy<ops::Hardmax>},
      {"", "LpPool", 1, 1, import_lp_pool_v1},
      {"", "GlobalLpPool", 1, 1, import_global_lp_pool_v1},
      {"", "GroupNormalization", 18, 20, import_group_norm_v18},
  };
}

}  // namespace kiln::compiler
