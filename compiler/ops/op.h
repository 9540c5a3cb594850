// SPDX-License-Identifier: Apache-2.0
// Op: an op kind plus its attribute struct, type-erased so that graphs hold any op by value.
//
// Every op is a plain struct in ops/<family>.h with `static constexpr OpKind kKind` and a
// `reflect(v)` member that lists each attribute once: `v("alpha", alpha);`. That one list gives
// printing, equality, hashing, ONNX import of attributes and serialization.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln::compiler {

class Graph;

enum class OpKind : uint16_t {
#define KILN_OP(name, family) k##name,
#include "compiler/ops/op_list.inc"
#undef KILN_OP
};

inline constexpr int kNumOpKinds = 0
#define KILN_OP(name, family) +1
#include "compiler/ops/op_list.inc"
#undef KILN_OP
    ;

// "Conv"; the ONNX op type for ops imported from ONNX.
std::string_view op_kind_name(OpKind kind);
// The family file the op is declared in: "elementwise", "nn", ...
std::string_view op_kind_family(OpKind kind);
// The kind with that name, or nullopt.
std::optional<OpKind> parse_op_kind(std::string_view name);

// A subgraph attribute (If branches, Loop/Scan bodies). Shared, compared by identity.
using GraphAttr = std::shared_ptr<Graph>;

// A pointer to one attribute field of an op struct; the set of attribute types kiln supports.
using AttrRef = std::variant<int64_t*, float*, std::string*, std::vector<int64_t>*,
                             std::vector<float>*, std::vector<std::string>*, Tensor*, DType*,
                             GraphAttr*, std::optional<int64_t>*, std::optional<float>*,
                             std::optional<std::string>*, std::optional<std::vector<int64_t>>*,
                             std::optional<std::vector<float>>*, std::optional<DType>*>;

// Receives every attribute of an op in declaration order. Op structs call `v("name", field)`.
class AttrVisitor {
 public:
  virtual ~AttrVisitor() = default;
  virtual void visit(std::string_view name, AttrRef field) = 0;

  template <class T>
  void operator()(std::string_view name, T& field) {
    visit(name, AttrRef(&field));
  }
};

namespace detail {
class OpConcept {
 public:
  virtual ~OpConcept() = default;
  virtual void reflect(AttrVisitor& v) = 0;
  virtual std::shared_ptr<OpConcept> clone() const = 0;
};
template <class T>
class OpModel final : public OpConcept {
 public:
  explicit OpModel(T v) : value(std::move(v)) {}
  void reflect(AttrVisitor& v) override { value.reflect(v); }
  std::shared_ptr<OpConcept> clone() const override { return std::make_shared<OpModel>(value); }
  T value;
};
}  // namespace detail

// An op value: immutable once built, cheap to copy (shared attributes).
class Op {
 public:
  Op() = default;
  template <class T>
    requires requires { T::kKind; }
  Op(T attrs)  // NOLINT implicit: Op(Conv{...})
      : kind_(T::kKind), impl_(std::make_shared<detail::OpModel<T>>(std::move(attrs))) {}

  // An op of `kind` with every attribute at its default.
  static Op make_default(OpKind kind);

  bool valid() const { return impl_ != nullptr; }
  OpKind kind() const { return kind_; }
  std::string_view name() const { return op_kind_name(kind_); }

  template <class T>
  bool is() const {
    return kind_ == T::kKind;
  }
  template <class T>
  const T& as() const {
    KILN_CHECK(kind_ == T::kKind, "Op::as<T>() with the wrong op kind");
    return static_cast<const detail::OpModel<T>&>(*impl_).value;
  }
  template <class T>
  const T* get_if() const {
    return kind_ == T::kKind ? &static_cast<const detail::OpModel<T>&>(*impl_).value : nullptr;
  }

  // Visits every attribute read-only (the visitor must not modify the fields).
  void reflect(AttrVisitor& v) const { impl_->reflect(v); }
  // A copy whose attributes the visitor may modify (the ONNX importer fills attributes this way).
  Op with_attributes(AttrVisitor& v) const;

  // "[alpha=0.2, axes=[0,1]]", or "" without attributes. Tensors print as dtype+shape and, when
  // small, their values; subgraphs as "<graph name>".
  std::string attributes_string() const;
  // The subgraphs among the attributes, in declaration order.
  std::vector<Graph*> subgraphs() const;

  // Same kind and equal attributes (tensors by value, subgraphs by identity).
  friend bool operator==(const Op& a, const Op& b);
  size_t hash() const;

 private:
  OpKind kind_{};
  std::shared_ptr<detail::OpConcept> impl_;
};

}  // namespace kiln::compiler
