// SPDX-License-Identifier: Apache-2.0
// Tensor (owning, 64-byte aligned, shared storage) and TensorView (non-owning), both dense row-major.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace kiln {

inline constexpr size_t kTensorAlignment = 64;

// A non-owning view of dense row-major data. Cheap to copy; the caller keeps the data alive.
class TensorView {
 public:
  TensorView() = default;
  TensorView(DType dtype, Shape shape, void* data)
      : dtype_(dtype), shape_(std::move(shape)), data_(data) {}

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  void* raw_data() const { return data_; }

  // Typed access; checks that T matches the dtype.
  template <class T>
  T* data() const {
    KILN_CHECK(dtype_of<T>() == dtype_, "TensorView::data<T>() with the wrong element type");
    return static_cast<T*>(data_);
  }
  template <class T>
  std::span<T> span() const {
    return {data<T>(), static_cast<size_t>(numel())};
  }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  void* data_ = nullptr;
};

// An owning tensor. Copies share the storage (like a shared_ptr); clone() copies the elements.
// Storage is 64-byte aligned and zero-initialized (kString elements are empty strings).
class Tensor {
 public:
  Tensor() = default;  // an f32 scalar with no storage; defined() is false

  // Allocates zeroed storage; fails with kResourceExhausted (naming the size) when memory runs out,
  // and kInvalidArgument for a negative dim.
  static Result<Tensor> allocate(DType dtype, Shape shape);
  // Like allocate(), but the storage (of a dtype other than kString) is left as it is, for a
  // caller that writes every element at once (a copy of received bytes): no pass zeroing it first.
  static Result<Tensor> allocate_uninitialized(DType dtype, Shape shape);
  // Like allocate(), for sizes that are known to be small (tests, scalars); aborts on failure.
  Tensor(DType dtype, Shape shape);

  // Wraps memory owned by `owner` (a mapped file, a caller buffer) without copying.
  static Tensor wrap(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner);

  // A tensor holding one value: Tensor::scalar(1.5f).
  template <class T>
  static Tensor scalar(T value) {
    Tensor t(dtype_of<T>(), Shape{});
    *t.data<T>() = std::move(value);
    return t;
  }
  // A 1-D (or `shape`d) tensor with the given values.
  template <class T>
  static Tensor from_vector(std::span<const T> values, Shape shape) {
    KILN_CHECK(shape.numel() == static_cast<int64_t>(values.size()), "from_vector: size mismatch");
    Tensor t(dtype_of<T>(), std::move(shape));
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector<T>(std::span<const T>(values),
                          Shape{static_cast<int64_t>(values.size())});
  }

  bool defined() const { return data_ != nullptr || storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  void* raw_data() const { return data_; }

  template <class T>
  T* data() const {
    KILN_CHECK(dtype_of<T>() == dtype_, "Tensor::data<T>() with the wrong element type");
    return static_cast<T*>(data_);
  }
  template <class T>
  std::span<T> span() const {
    return {data<T>(), static_cast<size_t>(numel())};
  }

  TensorView view() const { return TensorView(dtype_, shape_, data_); }

  // A deep copy with its own storage; an undefined tensor clones to an undefined tensor.
  Tensor clone() const;
  // The same storage seen with another shape of equal element count.
  Tensor reshaped(Shape shape) const;
  // True when dtype, shape and every element are equal (NaN != NaN); two undefined tensors are
  // equal, an undefined and a defined one are not.
  bool equals(const Tensor& other) const;

 private:
  static Result<Tensor> allocate_storage(DType dtype, Shape shape, bool zero);

  DType dtype_ = DType::kF32;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<const void> storage_;
};

}  // namespace kiln
