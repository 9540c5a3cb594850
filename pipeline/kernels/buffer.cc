// SPDX-License-Identifier: Apache-2.0
// Uninitialized allocation and the buffer pool.
#include "pipeline/kernels/buffer.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

namespace kiln::pipeline::kernels {
namespace {

constexpr size_t kAlignment = 64;

// The padded byte size of a tensor, or an error naming it when it cannot be allocated.
Result<size_t> padded_bytes(DType dtype, const Shape& shape) {
  KILN_CHECK(dtype != DType::kString, "uninitialized strings");
  KILN_ASSIGN_OR_RETURN(int64_t numel, shape.checked_numel());
  const size_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(numel) > SIZE_MAX / elem / 2) {
    return resource_exhausted_error(fmt::format("tensor {} of {} is too large to allocate",
                                                shape.to_string(), dtype_name(dtype)));
  }
  const size_t bytes = static_cast<size_t>(numel) * elem;
  return std::max<size_t>((bytes + kAlignment - 1) / kAlignment, 1) * kAlignment;
}

Result<void*> aligned(size_t padded, DType dtype, const Shape& shape) {
  void* data = std::aligned_alloc(kAlignment, padded);
  if (data == nullptr) {
    return resource_exhausted_error(
        fmt::format("out of memory allocating {} bytes for tensor {} of {}", padded,
                    shape.to_string(), dtype_name(dtype)));
  }
  return data;
}

}  // namespace

Result<Tensor> allocate_uninitialized(DType dtype, Shape shape) {
  KILN_ASSIGN_OR_RETURN(size_t padded, padded_bytes(dtype, shape));
  KILN_ASSIGN_OR_RETURN(void* data, aligned(padded, dtype, shape));
  std::shared_ptr<const void> owner(data, [](const void* p) { std::free(const_cast<void*>(p)); });
  return Tensor::wrap(dtype, std::move(shape), data, std::move(owner));
}

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached));
}

BufferPool::~BufferPool() {
  for (auto& [bytes, data] : idle_) std::free(data);
}

Result<Tensor> BufferPool::allocate(DType dtype, Shape shape) {
  KILN_ASSIGN_OR_RETURN(size_t padded, padded_bytes(dtype, shape));
  void* data = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < idle_.size(); ++i) {
      if (idle_[i].first == padded) {
        data = idle_[i].second;
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (data == nullptr) {
    KILN_ASSIGN_OR_RETURN(data, aligned(padded, dtype, shape));
  }
  std::weak_ptr<BufferPool> pool = weak_from_this();
  std::shared_ptr<const void> owner(data, [pool, padded](const void* p) {
    if (auto alive = pool.lock()) {
      alive->give_back(const_cast<void*>(p), padded);
    } else {
      std::free(const_cast<void*>(p));
    }
  });
  return Tensor::wrap(dtype, std::move(shape), data, std::move(owner));
}

size_t BufferPool::cached() const {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

void BufferPool::give_back(void* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (idle_.size() >= max_cached_) {
    std::free(idle_.front().second);
    idle_.erase(idle_.begin());
  }
  idle_.emplace_back(bytes, data);
}

}  // namespace kiln::pipeline::kernels
