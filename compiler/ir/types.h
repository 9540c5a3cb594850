// SPDX-License-Identifier: Apache-2.0
// The static types of IR values: tensors with known or symbolic dims, sequences and optionals.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace kiln::compiler {

// One dimension: a known size (>= 0), or unknown with an optional symbol (ONNX dim_param).
struct Dim {
  int64_t value = -1;
  std::string symbol;

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT implicit: dims are written as numbers
  static Dim symbolic(std::string name) {
    Dim d;
    d.symbol = std::move(name);
    return d;
  }
  bool known() const { return value >= 0; }
  friend bool operator==(const Dim& a, const Dim& b) {
    return a.value == b.value && a.symbol == b.symbol;
  }
};

// A tensor's element type and dims; `dims` is nullopt when even the rank is unknown.
struct TensorType {
  DType dtype = DType::kF32;
  std::optional<std::vector<Dim>> dims;

  TensorType() = default;
  TensorType(DType d, std::vector<Dim> ds) : dtype(d), dims(std::move(ds)) {}
  TensorType(DType d, const Shape& shape);
  static TensorType unranked(DType d) {
    TensorType t;
    t.dtype = d;
    return t;
  }

  bool has_rank() const { return dims.has_value(); }
  int rank() const { return dims ? static_cast<int>(dims->size()) : -1; }
  // True when the rank and every dim are known.
  bool is_static() const;
  // The concrete shape; only valid when is_static().
  Shape shape() const;
  // "f32[1,3,N,224]", "i64[?]" for an unknown dim, "f32[*]" for an unknown rank.
  std::string to_string() const;

  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.dims == b.dims;
  }
};

// The type of any IR value.
class ValueType {
 public:
  enum class Kind : uint8_t { kTensor, kSequence, kOptional };

  ValueType() = default;
  ValueType(TensorType t) : tensor_(std::move(t)) {}  // NOLINT implicit
  static ValueType sequence(ValueType element);
  static ValueType optional(ValueType element);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  const TensorType& tensor() const;
  TensorType& tensor();
  // The element type of a sequence or optional.
  const ValueType& element() const;

  std::string to_string() const;
  friend bool operator==(const ValueType& a, const ValueType& b);

 private:
  Kind kind_ = Kind::kTensor;
  TensorType tensor_;
  std::shared_ptr<const ValueType> element_;
};

}  // namespace kiln::compiler
