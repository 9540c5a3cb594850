// SPDX-License-Identifier: Apache-2.0
// Type printing and helpers.
#include "compiler/ir/types.h"

#include <fmt/format.h>

namespace kiln::compiler {

TensorType::TensorType(DType d, const Shape& shape) : dtype(d) {
  dims.emplace(shape.begin(), shape.end());
}

bool TensorType::is_static() const {
  if (!dims) return false;
  for (const Dim& d : *dims) {
    if (!d.known()) return false;
  }
  return true;
}

Shape TensorType::shape() const {
  KILN_CHECK(is_static(), "TensorType::shape() of a non-static type");
  std::vector<int64_t> out;
  out.reserve(dims->size());
  for (const Dim& d : *dims) out.push_back(d.value);
  return Shape(std::move(out));
}

std::string TensorType::to_string() const {
  std::string out(dtype_name(dtype));
  if (!dims) return out + "[*]";
  out += '[';
  for (size_t i = 0; i < dims->size(); ++i) {
    if (i) out += ',';
    const Dim& d = (*dims)[i];
    if (d.known()) {
      out += std::to_string(d.value);
    } else {
      out += d.symbol.empty() ? "?" : d.symbol;
    }
  }
  out += ']';
  return out;
}

ValueType ValueType::sequence(ValueType element) {
  ValueType t;
  t.kind_ = Kind::kSequence;
  t.element_ = std::make_shared<const ValueType>(std::move(element));
  return t;
}

ValueType ValueType::optional(ValueType element) {
  ValueType t;
  t.kind_ = Kind::kOptional;
  t.element_ = std::make_shared<const ValueType>(std::move(element));
  return t;
}

const TensorType& ValueType::tensor() const {
  KILN_CHECK(kind_ == Kind::kTensor, "ValueType::tensor() on a " + to_string());
  return tensor_;
}

TensorType& ValueType::tensor() {
  KILN_CHECK(kind_ == Kind::kTensor, "ValueType::tensor() on a " + to_string());
  return tensor_;
}

const ValueType& ValueType::element() const {
  KILN_CHECK(element_ != nullptr, "ValueType::element() on a tensor type");
  return *element_;
}

std::string ValueType::to_string() const {
  switch (kind_) {
    case Kind::kTensor: return tensor_.to_string();
    case Kind::kSequence: return fmt::format("seq<{}>", element_->to_string());
    case Kind::kOptional: return fmt::format("opt<{}>", element_->to_string());
  }
  return "?";
}

bool operator==(const ValueType& a, const ValueType& b) {
  if (a.kind_ != b.kind_) return false;
  if (a.kind_ == ValueType::Kind::kTensor) return a.tensor_ == b.tensor_;
  return *a.element_ == *b.element_;
}

}  // namespace kiln::compiler
