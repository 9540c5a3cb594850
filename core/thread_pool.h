// SPDX-License-Identifier: Apache-2.0
// ThreadPool: a fixed set of worker threads running submitted tasks, with a blocking parallel_for.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

// The number of threads to use when the caller says 0: KILN_NUM_THREADS if set, else the number
// of hardware threads (at least 1).
int default_thread_count();

class ThreadPool {
 public:
  // Starts `num_threads` workers (0: default_thread_count()).
  explicit ThreadPool(int num_threads = 0);
  // Runs every task already submitted, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }

  // Queues `task` to run once on some worker.
  void submit(std::function<void()> task);
  // Blocks until the queue is empty and no task is running.
  void wait_idle();

  // Calls fn(begin, end) over disjoint chunks that cover [0, n) exactly once, on the workers and
  // the calling thread, and returns when all chunks are done. `min_chunk` bounds the chunk size
  // from below so that tiny ranges stay on one thread. Safe to call from several threads at once;
  // must not be called from inside a task of the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

 private:
  void worker_loop();

  std::vector<std::thread> workers_;
  std::deque<std::function<void()>> queue_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  int running_ = 0;
  bool stopping_ = false;
};

}  // namespace kiln
