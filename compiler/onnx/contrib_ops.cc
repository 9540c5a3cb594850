// SPDX-License-Identifier: Apache-2.0
// ONNX import of the com.microsoft and ai.onnx.ml ops that common exported models carry, each
// rewritten into standard ops (no kiln op of their own): GELU variants (onto Gelu), FusedMatMul,
// SkipLayerNormalization, contrib LayerNormalization; Binarizer, Scaler, Normalizer,
// ArrayFeatureExtractor, LinearRegressor.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <numeric>

#include "compiler/onnx/node_rewriter.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler {

namespace {

Status require_inputs(const NodeImporter& ni, int n) {
  for (int i = 0; i < n; ++i) {
    if (!ni.has_input(i)) return ni.errorf("input {} is required", i);
  }
  return Status();
}

Status require_tensor_rank(const NodeImporter& ni, int i) {
  if (!ni.input(i)->type().is_tensor() || !ni.input(i)->tensor_type().has_rank()) {
    return ni.errorf("input {} must be a tensor of known rank", i);
  }
  return Status();
}

// Gelu and BiasGelu are the exact (erf) GELU of X (+ bias), FastGelu its tanh approximation with
// the same constants: each is the standard Gelu op.
Status import_gelu_of_sum(NodeImporter& ni, int min_inputs, std::string approximate) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, min_inputs));
  Value* x = ni.input(0);
  if (ni.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(x, r.op<ops::Add>({x, ni.input(1)}));
  }
  ops::Gelu gelu;
  gelu.approximate = std::move(approximate);
  KILN_ASSIGN_OR_RETURN(Value * y, r.op(Op(std::move(gelu)), {x}));
  return r.output(0, y);
}

Status import_gelu(NodeImporter& ni) {
  if (ni.num_inputs() > 1) return ni.errorf("expected 1 input, got {}", ni.num_inputs());
  return import_gelu_of_sum(ni, 1, "none");
}

Status import_bias_gelu(NodeImporter& ni) {
  return import_gelu_of_sum(ni, 2, "none");
}

// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), x = X (+ bias)
Status import_fast_gelu(NodeImporter& ni) {
  return import_gelu_of_sum(ni, 1, "tanh");
}

// x * sigmoid(alpha * x)
Status import_quick_gelu(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 1));
  Value* x = ni.input(0);
  const double alpha = ni.float_attr("alpha").value_or(1.702f);
  KILN_ASSIGN_OR_RETURN(Value * ax, r.op<ops::Mul>({x, r.scalar(x, alpha)}));
  KILN_ASSIGN_OR_RETURN(Value * sig, r.op<ops::Sigmoid>({ax}));
  KILN_ASSIGN_OR_RETURN(Value * y, r.op<ops::Mul>({x, sig}));
  return r.output(0, y);
}

// Transposes the last two dims of a value of known rank >= 2.
Result<Value*> swap_last_two(NodeRewriter& r, Value* v) {
  const int rank = v->tensor_type().rank();
  if (rank < 2)
    return r.ni().errorf("a transposed operand needs rank >= 2, got {}",
                         v->tensor_type().to_string());
  ops::Transpose t;
  t.perm = std::vector<int64_t>(static_cast<size_t>(rank));
  std::iota(t.perm->begin(), t.perm->end(), 0);
  std::swap((*t.perm)[static_cast<size_t>(rank - 1)], (*t.perm)[static_cast<size_t>(rank - 2)]);
  return r.op(Op(std::move(t)), {v});
}

// alpha * MatMul(transA ? A^T : A, transB ? B^T : B), transposes over the last two dims.
Status import_fused_matmul(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 2));
  if (ni.int_attr("transBatchA").value_or(0) != 0 || ni.int_attr("transBatchB").value_or(0) != 0) {
    return unimplemented_error(
        std::string(ni.error("transBatchA/transBatchB are not supported").message()));
  }
  Value* a = ni.input(0);
  Value* b = ni.input(1);
  if (ni.int_attr("transA").value_or(0) != 0) {
    KILN_RETURN_IF_ERROR(require_tensor_rank(ni, 0));
    KILN_ASSIGN_OR_RETURN(a, swap_last_two(r, a));
  }
  if (ni.int_attr("transB").value_or(0) != 0) {
    KILN_RETURN_IF_ERROR(require_tensor_rank(ni, 1));
    KILN_ASSIGN_OR_RETURN(b, swap_last_two(r, b));
  }
  KILN_ASSIGN_OR_RETURN(Value * y, r.op<ops::MatMul>({a, b}));
  const double alpha = ni.float_attr("alpha").value_or(1.0f);
  if (alpha != 1.0) {
    KILN_ASSIGN_OR_RETURN(y, r.op<ops::Mul>({y, r.scalar(y, alpha)}));
  }
  return r.output(0, y);
}

// LayerNormalization over the last axis of input + skip (+ bias); outputs: Y, mean, inv_std_var,
// and the sum that was normalized.
Status import_skip_layer_norm(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 3));
  KILN_ASSIGN_OR_RETURN(Value * sum, r.op<ops::Add>({ni.input(0), ni.input(1)}));
  if (ni.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(sum, r.op<ops::Add>({sum, ni.input(4)}));
  }
  ops::LayerNormalization ln;
  ln.epsilon = ni.float_attr("epsilon").value_or(1e-12f);
  std::vector<Value*> inputs = {sum, ni.input(2)};
  if (ni.has_input(3)) inputs.push_back(ni.input(3));
  KILN_ASSIGN_OR_RETURN(Node * node, ni.emit_internal(Op(ln), std::move(inputs), 3));
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(r.output(i, node->output(i)));
  return r.output(3, sum);
}

// The contrib LayerNormalization has the attributes and outputs of ONNX's LayerNormalization-17.
Status import_contrib_layer_norm(NodeImporter& ni) {
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(OpKind::kLayerNormalization));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// ---- ai.onnx.ml ----

// Y = X > threshold ? 1 : 0, in X's type.
Status import_binarizer(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 1));
  Value* x = ni.input(0);
  const double threshold = ni.float_attr("threshold").value_or(0.0f);
  KILN_ASSIGN_OR_RETURN(Value * above, r.op<ops::Greater>({x, r.scalar(x, threshold)}));
  KILN_ASSIGN_OR_RETURN(Value * y, r.op<ops::Where>({above, r.scalar(x, 1.0), r.scalar(x, 0.0)}));
  return r.output(0, y);
}

Result<Value*> as_f32(NodeRewriter& r, Value* x) {
  if (x->tensor_type().dtype == DType::kF32) return x;
  ops::Cast cast;
  cast.to = DType::kF32;
  return r.op(Op(cast), {x});
}

// Y = (X - offset) * scale in f32; offset and scale are one value or one per feature.
Status import_scaler(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 1));
  KILN_ASSIGN_OR_RETURN(Value * x, as_f32(r, ni.input(0)));
  std::vector<float> offset = ni.floats_attr("offset").value_or(std::vector<float>{0.0f});
  std::vector<float> scale = ni.floats_attr("scale").value_or(std::vector<float>{1.0f});
  KILN_ASSIGN_OR_RETURN(Value * shifted,
                        r.op<ops::Sub>({x, ni.constant(Tensor::from_vector(offset))}));
  KILN_ASSIGN_OR_RETURN(Value * y,
                        r.op<ops::Mul>({shifted, ni.constant(Tensor::from_vector(scale))}));
  return r.output(0, y);
}

// Each row divided by its max, L1 or L2 norm, in f32.
Status import_normalizer(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 1));
  KILN_ASSIGN_OR_RETURN(Value * x, as_f32(r, ni.input(0)));
  const std::string norm = ni.string_attr("norm").value_or("MAX");
  Value* divisor = nullptr;
  if (norm == "MAX") {
    ops::ReduceMax max;
    max.axes = std::vector<int64_t>{-1};
    KILN_ASSIGN_OR_RETURN(divisor, r.op(Op(max), {x}));
  } else if (norm == "L1") {
    KILN_ASSIGN_OR_RETURN(Value * abs, r.op<ops::Abs>({x}));
    ops::ReduceSum sum;
    sum.axes = std::vector<int64_t>{-1};
    KILN_ASSIGN_OR_RETURN(divisor, r.op(Op(sum), {abs}));
  } else if (norm == "L2") {
    ops::ReduceSumSquare sum;
    sum.axes = std::vector<int64_t>{-1};
    KILN_ASSIGN_OR_RETURN(Value * squares, r.op(Op(sum), {x}));
    KILN_ASSIGN_OR_RETURN(divisor, r.op<ops::Sqrt>({squares}));
  } else {
    return ni.errorf("norm must be MAX, L1 or L2, got \"{}\"", norm);
  }
  KILN_ASSIGN_OR_RETURN(Value * y, r.op<ops::Div>({x, divisor}));
  return r.output(0, y);
}

// Selects elements of the last axis by index.
Status import_array_feature_extractor(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 2));
  ops::Gather gather;
  gather.axis = -1;
  KILN_ASSIGN_OR_RETURN(Value * y, r.op(Op(gather), {ni.input(0), ni.input(1)}));
  return r.output(0, y);
}

// Y = X W^T + b with W [targets, features] from `coefficients`; post_transform NONE only.
Status import_linear_regressor(NodeImporter& ni) {
  NodeRewriter r(ni);
  KILN_RETURN_IF_ERROR(require_inputs(ni, 1));
  const std::string post = ni.string_attr("post_transform").value_or("NONE");
  if (post != "NONE") {
    return unimplemented_error(
        std::string(ni.errorf("post_transform {} is not supported", post).message()));
  }
  const int64_t targets = ni.int_attr("targets").value_or(1);
  std::vector<float> coefficients = ni.floats_attr("coefficients").value_or(std::vector<float>{});
  if (targets <= 0 || coefficients.empty() ||
      coefficients.size() % static_cast<size_t>(targets) != 0) {
    return ni.errorf("expected coefficients of targets ({}) x features values, got {}", targets,
                     coefficients.size());
  }
  const auto features = static_cast<int64_t>(coefficients.size()) / targets;
  std::vector<float> intercepts =
      ni.floats_attr("intercepts").value_or(std::vector<float>(static_cast<size_t>(targets), 0.0f));
  if (static_cast<int64_t>(intercepts.size()) != targets) {
    return ni.errorf("expected {} intercepts, got {}", targets, intercepts.size());
  }
  KILN_ASSIGN_OR_RETURN(Value * x, as_f32(r, ni.input(0)));
  Value* w = ni.constant(Tensor::from_vector(coefficients).reshaped(Shape{targets, features}));
  ops::Gemm gemm;
  gemm.transB = 1;
  KILN_ASSIGN_OR_RETURN(Value * y,
                        r.op(Op(gemm), {x, w, ni.constant(Tensor::from_vector(intercepts))}));
  return r.output(0, y);
}

constexpr int64_t kAnyVersion = 1000;

}  // namespace

std::vector<OpsetImporter> contrib_importers() {
  return {
      {"com.microsoft", "Gelu", 1, kAnyVersion, import_gelu},
      {"com.microsoft", "BiasGelu", 1, kAnyVersion, import_bias_gelu},
      {"com.microsoft", "FastGelu", 1, kAnyVersion, import_fast_gelu},
      {"com.microsoft", "QuickGelu", 1, kAnyVersion, import_quick_gelu},
      {"com.microsoft", "FusedMatMul", 1, kAnyVersion, import_fused_matmul},
      {"com.microsoft", "SkipLayerNormalization", 1, kAnyVersion, import_skip_layer_norm},
      {"com.microsoft", "LayerNormalization", 1, kAnyVersion, import_contrib_layer_norm},
      {"ai.onnx.ml", "Binarizer", 1, kAnyVersion, import_binarizer},
      {"ai.onnx.ml", "Scaler", 1, kAnyVersion, import_scaler},
      {"ai.onnx.ml", "Normalizer", 1, kAnyVersion, import_normalizer},
      {"ai.onnx.ml", "ArrayFeatureExtractor", 1, kAnyVersion, import_array_feature_extractor},
      {"ai.onnx.ml", "LinearRegressor", 1, kAnyVersion, import_linear_regressor},
  };
}

}  // namespace kiln::compiler
