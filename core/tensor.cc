// SPDX-License-Identifier: Apache-2.0
// Tensor storage: aligned allocation, string elements, copies.
#include "core/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {

Result<Tensor> Tensor::allocate(DType dtype, Shape shape) {
  return allocate_storage(dtype, std::move(shape), /*zero=*/true);
}

Result<Tensor> Tensor::allocate_uninitialized(DType dtype, Shape shape) {
  return allocate_storage(dtype, std::move(shape), /*zero=*/false);
}

Result<Tensor> Tensor::allocate_storage(DType dtype, Shape shape, bool zero) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, shape.checked_numel());
  const size_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(numel) > SIZE_MAX / elem / 2) {
    return resource_exhausted_error(
        fmt::format("tensor {} of {} is too large to allocate", shape.to_string(), dtype_name(dtype)));
  }
  size_t bytes = static_cast<size_t>(numel) * elem;
  size_t padded = std::max<size_t>((bytes + kTensorAlignment - 1) / kTensorAlignment, 1) *
                  kTensorAlignment;
  void* data = std::aligned_alloc(kTensorAlignment, padded);
  if (data == nullptr) {
    return resource_exhausted_error(fmt::format("out of memory allocating {} bytes for tensor {} of {}",
                                                bytes, shape.to_string(), dtype_name(dtype)));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  if (dtype == DType::kString) {
    auto* strings = static_cast<std::string*>(data);
    std::uninitialized_value_construct_n(strings, numel);
    t.storage_ = std::shared_ptr<const void>(data, [numel](const void* p) {
      std::destroy_n(static_cast<std::string*>(const_cast<void*>(p)), numel);
      std::free(const_cast<void*>(p));
    });
  } else {
    if (zero) std::memset(data, 0, padded);
    t.storage_ = std::shared_ptr<const void>(data, [](const void* p) { std::free(const_cast<void*>(p)); });
  }
  return t;
}

Tensor::Tensor(DType dtype, Shape shape) {
  Result<Tensor> t = allocate(dtype, std::move(shape));
  KILN_CHECK(t.ok(), t.status().to_string());
  *this = std::move(t).value();
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return *this;
  Result<Tensor> copy = allocate_uninitialized(dtype_, shape_);
  KILN_CHECK(copy.ok(), copy.status().to_string());
  Tensor out = std::move(copy).value();
  if (dtype_ == DType::kString) {
    std::copy_n(data<std::string>(), numel(), out.data<std::string>());
  } else if (nbytes() > 0) {
    std::memcpy(out.data_, data_, nbytes());
  }
  return out;
}

Tensor Tensor::reshaped(Shape shape) const {
  KILN_CHECK(shape.numel() == numel(), "reshaped: element count differs");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

bool Tensor::equals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || !(shape_ == other.shape_)) return false;
  if (!defined() || !other.defined()) return defined() == other.defined();
  return visit_dtype(dtype_, [&]<class T>() {
    const T* a = static_cast<const T*>(data_);
    const T* b = static_cast<const T*>(other.data_);
    for (int64_t i = 0; i < numel(); ++i) {
      if (!(a[i] == b[i])) return false;
    }
    return true;
  });
}

}  // namespace kiln
