// SPDX-License-Identifier: Apache-2.0
// LabelEncoder's keys_*/values_*/default_* attribute forms turned into tensors.
#include "compiler/ops/ml_util.h"

#include <fmt/format.h>

#include <span>

namespace kiln::compiler {

namespace {

// The one given list of `floats`, `ints`, `strings` and `tensor`, as a 1-D tensor.
Result<Tensor> one_of(std::string_view what, const std::vector<float>& floats,
                      const std::vector<int64_t>& ints, const std::vector<std::string>& strings,
                      const Tensor& tensor) {
  const int given = !floats.empty() + !ints.empty() + !strings.empty() + tensor.defined();
  if (given != 1) {
    return invalid_argument_error(fmt::format(
        "expected exactly one of the {0}_floats, {0}_int64s, {0}_strings and {0}_tensor "
        "attributes, got {1}",
        what, given));
  }
  if (!floats.empty()) return Tensor::from_vector<float>(floats);
  if (!ints.empty()) return Tensor::from_vector<int64_t>(ints);
  if (!strings.empty()) return Tensor::from_vector<std::string>(strings);
  if (tensor.rank() != 1) {
    return invalid_argument_error(
        fmt::format("expected a 1-D {}_tensor, got {}", what, tensor.shape().to_string()));
  }
  return tensor;
}

}  // namespace

Result<LabelTable> label_table(const ops::LabelEncoder& op) {
  LabelTable t;
  KILN_ASSIGN_OR_RETURN(
      t.keys, one_of("keys", op.keys_floats, op.keys_int64s, op.keys_strings, op.keys_tensor));
  KILN_ASSIGN_OR_RETURN(t.values, one_of("values", op.values_floats, op.values_int64s,
                                         op.values_strings, op.values_tensor));
  if (t.keys.numel() != t.values.numel()) {
    return invalid_argument_error(fmt::format("expected as many keys as values, got {} and {}",
                                              t.keys.numel(), t.values.numel()));
  }
  const DType type = t.values.dtype();
  if (op.values_tensor.defined()) {
    if (!op.default_tensor.defined()) {
      t.fallback = Tensor(type, Shape{1});  // zero (or "") of the values' type
    } else if (op.default_tensor.dtype() != type || op.default_tensor.numel() != 1) {
      return invalid_argument_error(fmt::format(
          "expected a one-element {} default_tensor (the values' type), got {}{}", dtype_name(type),
          dtype_name(op.default_tensor.dtype()), op.default_tensor.shape().to_string()));
    } else {
      t.fallback = op.default_tensor.reshaped(Shape{1});
    }
  } else if (type == DType::kF32) {
    t.fallback = Tensor::from_vector<float>({op.default_float});
  } else if (type == DType::kI64) {
    t.fallback = Tensor::from_vector<int64_t>({op.default_int64});
  } else {
    t.fallback = Tensor::from_vector<std::string>({op.default_string});
  }
  return t;
}

}  // namespace kiln::compiler
