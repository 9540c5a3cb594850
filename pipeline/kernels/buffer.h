// SPDX-License-Identifier: Apache-2.0
// Uninitialized tensor storage for kernel outputs that write every element, and a pool that
// reuses large buffers (batches) across iterations instead of returning them to the system.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::pipeline::kernels {

// Like Tensor::allocate (64-byte aligned, errors naming the shape when too large or out of
// memory) but without zeroing: for outputs a kernel overwrites entirely. Not for kString.
Result<Tensor> allocate_uninitialized(DType dtype, Shape shape);

// Hands out uninitialized tensors whose storage goes back to the pool, not to the system, when
// the last tensor using it is destroyed, so a pipeline's batch buffers are allocated once and
// reused. At most `max_cached` idle buffers are kept. Thread-safe; tensors may outlive the pool.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create(size_t max_cached);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  Result<Tensor> allocate(DType dtype, Shape shape);
  // Idle buffers held now (for tests).
  size_t cached() const;

 private:
  explicit BufferPool(size_t max_cached) : max_cached_(max_cached) {}
  void give_back(void* data, size_t bytes);

  size_t max_cached_;
  mutable std::mutex mutex_;
  std::vector<std::pair<size_t, void*>> idle_;  // (padded bytes, storage)
};

}  // namespace kiln::pipeline::kernels
