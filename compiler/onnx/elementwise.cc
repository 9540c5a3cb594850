// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the elementwise op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/elementwise.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/onnx/node_importer.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/ops/shape.h"

namespace kiln::compiler {

namespace {

constexpr std::string_view kConsumedInputs[] = {"consumed_inputs"};
constexpr std::string_view kLegacyBroadcast[] = {"broadcast", "axis", "consumed_inputs"};

// Opsets 1 to 5 marked in-place inputs with `consumed_inputs`, which has no meaning for kiln.
Status import_ignoring_consumed_inputs(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind, kConsumedInputs));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// Binary ops before opset 7: with broadcast=1 and `axis`, B's dims line up with A's from `axis`
// on (not from the right as in numpy); B is reshaped with trailing 1s so numpy rules agree.
Status import_legacy_broadcast(NodeImporter& ni, OpKind kind) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(kind, kLegacyBroadcast));
  if (ni.num_inputs() != 2 || !ni.has_input(0) || !ni.has_input(1)) {
    return ni.errorf("expected 2 inputs, got {}", ni.num_inputs());
  }
  Value* a = ni.input(0);
  Value* b = ni.input(1);
  std::optional<int64_t> axis = ni.int_attr("axis");
  if (ni.int_attr("broadcast").value_or(0) != 0 && axis) {
    if (!a->type().is_tensor() || !b->type().is_tensor() || !a->tensor_type().has_rank() ||
        !b->tensor_type().has_rank()) {
      return ni.error("broadcast with an axis needs inputs of known rank");
    }
    const int64_t ra = a->tensor_type().rank();
    const int64_t rb = b->tensor_type().rank();
    int64_t start = *axis < 0 ? *axis + ra : *axis;
    if (start < 0 || start + rb > ra) {
      return ni.errorf("broadcast axis {} does not fit B {} into A {}", *axis,
                       b->tensor_type().to_string(), a->tensor_type().to_string());
    }
    const int64_t trailing = ra - start - rb;
    if (trailing > 0) {
      std::vector<int64_t> shape(static_cast<size_t>(rb), 0);  // 0: keep B's dim
      shape.resize(static_cast<size_t>(rb + trailing), 1);
      KILN_ASSIGN_OR_RETURN(
          Node * reshape,
          ni.emit_internal(ops::Reshape{}, {b, ni.constant(Tensor::from_vector(shape))}));
      b = reshape->output(0);
    }
  }
  return ni.emit(std::move(op), {a, b}).status();
}

// Clip before opset 11: min and max are attributes; each given one becomes a scalar input of the
// input's element type.
Status import_clip_v1(NodeImporter& ni) {
  static constexpr std::string_view kIgnore[] = {"min", "max", "consumed_inputs"};
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kClip, kIgnore));
  if (ni.num_inputs() != 1 || !ni.has_input(0)) {
    return ni.errorf("expected 1 input, got {}", ni.num_inputs());
  }
  Value* x = ni.input(0);
  if (!x->type().is_tensor() || !dtype_is_float(x->tensor_type().dtype)) {
    return ni.errorf("expected a float input, got {}", x->type().to_string());
  }
  const DType dtype = x->tensor_type().dtype;
  auto bound = [&](std::string_view name) -> Value* {
    std::optional<float> v = ni.float_attr(name);
    if (!v) return nullptr;
    return visit_dtype(dtype, [&]<class T>() -> Value* {
      if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
        return ni.constant(Tensor::scalar(static_cast<T>(*v)));
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        return ni.constant(Tensor::scalar(T(*v)));
      } else {
        return nullptr;
      }
    });
  };
  std::vector<Value*> inputs = {x, bound("min"), bound("max")};
  while (inputs.back() == nullptr) inputs.pop_back();
  return ni.emit(std::move(op), std::move(inputs)).status();
}

// Cast before opset 6 names the target type as a string ("FLOAT", "INT64", ...).
Status import_cast_v1(NodeImporter& ni) {
  std::optional<std::string> to = ni.string_attr("to");
  if (!to) return ni.error("expected the attribute to (a type name), got none");
  for (const auto& a : ni.proto().attribute()) {
    if (a.name() != "to") {
      return ni.errorf("attribute \"{}\" is not supported for Cast at opset {}", a.name(),
                       ni.opset());
    }
  }
  std::string upper = *to;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  onnx::TensorProto_DataType code{};
  if (!onnx::TensorProto_DataType_Parse(upper, &code)) {
    return ni.errorf("attribute to: unknown type name \"{}\"", *to);
  }
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(code));
  if (!dtype) return ni.errorf("attribute to: element type \"{}\" is not supported", *to);
  ops::Cast op;
  op.to = *dtype;
  return ni.emit(op, ni.inputs()).status();
}

// PRelu before opset 7: a 1-D slope holds one value per channel (dim 1 of X); it is reshaped to
// [C, 1, ...] so that numpy broadcasting lines it up with dim 1.
Status import_prelu_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kPRelu, kConsumedInputs));
  if (ni.num_inputs() != 2 || !ni.has_input(0) || !ni.has_input(1)) {
    return ni.errorf("expected 2 inputs, got {}", ni.num_inputs());
  }
  Value* x = ni.input(0);
  Value* slope = ni.input(1);
  if (x->type().is_tensor() && slope->type().is_tensor() && x->tensor_type().rank() > 2 &&
      slope->tensor_type().rank() == 1) {
    std::vector<int64_t> shape(static_cast<size_t>(x->tensor_type().rank() - 1), 1);
    shape[0] = 0;  // 0: keep the slope's length
    KILN_ASSIGN_OR_RETURN(
        Node * reshape,
        ni.emit_internal(ops::Reshape{}, {slope, ni.constant(Tensor::from_vector(shape))}));
    slope = reshape->output(0);
  }
  return ni.emit(std::move(op), {x, slope}).status();
}

// Selu-1 had slightly different attribute defaults than Selu-6.
Status import_selu_v1(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op generic, ni.make_op(OpKind::kSelu, kConsumedInputs));
  ops::Selu op = generic.as<ops::Selu>();
  if (!ni.has_attr("alpha")) op.alpha = 1.67320001f;
  if (!ni.has_attr("gamma")) op.gamma = 1.05069995f;
  return ni.emit(op, ni.inputs()).status();
}

struct Row {
  std::string_view op_type;
  OpKind kind;
};

constexpr Row kConsumedInputsOps[] = {
    {"Abs", OpKind::kAbs},
    {"Ceil", OpKind::kCeil},
    {"Exp", OpKind::kExp},
    {"Floor", OpKind::kFloor},
    {"Log", OpKind::kLog},
    {"Neg", OpKind::kNeg},
    {"Reciprocal", OpKind::kReciprocal},
    {"Relu", OpKind::kRelu},
    {"Sigmoid", OpKind::kSigmoid},
    {"Sqrt", OpKind::kSqrt},
    {"Tanh", OpKind::kTanh},
    {"Elu", OpKind::kElu},
    {"HardSigmoid", OpKind::kHardSigmoid},
    {"LeakyRelu", OpKind::kLeakyRelu},
    {"Max", OpKind::kMax},
    {"Min", OpKind::kMin},
    {"Mean", OpKind::kMean},
    {"Sum", OpKind::kSum},
};

constexpr Row kLegacyBroadcastOps[] = {
    {"Add", OpKind::kAdd},         {"Sub", OpKind::kSub},   {"Mul", OpKind::kMul},
    {"Div", OpKind::kDiv},         {"Pow", OpKind::kPow},   {"And", OpKind::kAnd},
    {"Or", OpKind::kOr},           {"Xor", OpKind::kXor},   {"Equal", OpKind::kEqual},
    {"Greater", OpKind::kGreater}, {"Less", OpKind::kLess},
};

}  // namespace

std::vector<OpsetImporter> elementwise_importers() {
  std::vector<OpsetImporter> rows = {
      {"", "Clip", 1, 10, import_clip_v1},
      {"", "Cast", 1, 5, import_cast_v1},
      {"", "Selu", 1, 5, import_selu_v1},
      {"", "PRelu", 1, 6, import_prelu_v1},
  };
  for (const Row& r : kConsumedInputsOps) {
    OpKind kind = r.kind;
    rows.push_back({"", r.op_type, 1, 5, [kind](NodeImporter& ni) {
                      return import_ignoring_consumed_inputs(ni, kind);
                    }});
  }
  for (const Row& r : kLegacyBroadcastOps) {
    OpKind kind = r.kind;
    rows.push_back({"", r.op_type, 1, 6,
                    [kind](NodeImporter& ni) { return import_legacy_broadcast(ni, kind); }});
  }
  return rows;
}

}  // namespace kiln::compiler
