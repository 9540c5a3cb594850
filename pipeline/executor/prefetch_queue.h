// SPDX-License-Identifier: Apache-2.0
// A bounded blocking queue between the executor's producer thread and the consumer.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace kiln::pipeline::detail {

template <class T>
class PrefetchQueue {
 public:
  explicit PrefetchQueue(size_t capacity) : capacity_(capacity) {}

  // Blocks while full; returns false (dropping `item`) once close() was called.
  bool push(T item) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty; nullopt once closed and drained.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Wakes every waiter; later pushes fail.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Empties and reopens the queue (no thread may be waiting on it).
  void reopen() {
    std::lock_guard lock(mutex_);
    items_.clear();
    closed_ = false;
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace kiln::pipeline::detail
