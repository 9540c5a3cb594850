// SPDX-License-Identifier: Apache-2.0
// ThreadPool implementation.
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

#include "core/env.h"

namespace kiln {

int default_thread_count() {
  int64_t from_env = env_flag_int(EnvFlag::kNumThreads);
  if (from_env > 0) return static_cast<int>(std::min<int64_t>(from_env, 1024));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : default_thread_count();
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  work_ready_.notify_one();
}

void ThreadPool::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

void ThreadPool::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task();
    lock.lock();
    --running_;
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(min_chunk, 1));
  int64_t chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(size()) + 1);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  // Chunks are claimed from a shared counter, so the caller keeps working while workers start.
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mutex;
    std::condition_variable finished;
  };
  auto shared = std::make_shared<Shared>();
  const int64_t step = (n + chunks - 1) / chunks;
  auto run_chunks = [shared, step, n, chunks, &fn] {
    for (int64_t c; (c = shared->next.fetch_add(1)) < chunks;) {
      int64_t begin = c * step;
      int64_t end = std::min(n, begin + step);
      if (begin < end) fn(begin, end);
      if (shared->done.fetch_add(1) + 1 == chunks) {
        std::lock_guard lock(shared->mutex);
        shared->finished.notify_all();
      }
    }
  };
  for (int64_t i = 0; i < chunks - 1; ++i) submit(run_chunks);
  run_chunks();
  std::unique_lock lock(shared->mutex);
  shared->finished.wait(lock, [&] { return shared->done.load() == chunks; });
}

}  // namespace kiln
