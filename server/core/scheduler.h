// SPDX-License-Identifier: Apache-2.0
// Scheduler: one model version's request queue, dynamic batcher and instance threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/core/model_config.h"
#include "server/core/types.h"

namespace kiln::server {

using Clock = std::chrono::steady_clock;

// A request waiting in a scheduler's queue.
struct PendingRequest {
  InferenceRequest request;
  InferCallback done;
  // Entries along dim 0 this request adds to a batch (1 for models that do not batch along a dim).
  int64_t batch_size = 1;
  // Lower runs first; 1 is the highest priority, and 0 (the default) ranks after every other.
  uint32_t priority = 0;
  Clock::time_point arrived;
  // When the request is rejected if it is still queued; time_point::max() for none.
  Clock::time_point deadline = Clock::time_point::max();
};

// Queues requests and runs them in batches on `instances` threads. A batch holds whole requests
// whose batch sizes add up to at most max_batch_size (one request when that is 0). A batch is
// sent when it is full, when a preferred size can be filled, when max_queue_delay_microseconds
// has passed since its oldest request arrived, or at once when the delay is 0. Higher-priority
// requests are taken first; requests of equal priority in arrival order. A request still queued
// past its deadline is handed to `expire`.
class Scheduler {
 public:
  using RunBatch = std::function<void(std::vector<PendingRequest>& batch)>;
  using Expire = std::function<void(PendingRequest& request)>;

  // `label` names the model in KILN_TRACE_BATCHER lines.
  Scheduler(std::string label, BatchingConfig config, int64_t instances, RunBatch run,
            Expire expire);
  // Drains (see stop()).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the request, or fails without calling its callback: resource exhausted when the queue
  // holds max_queue_size requests, unavailable once stop() has begun.
  Status enqueue(PendingRequest&& request);

  // Stops taking requests, runs every queued one (without waiting for fuller batches) and joins
  // the instance threads. Idempotent.
  void stop();

  // Whether every instance thread started; when one could not (the system's thread limit), the
  // ones that did are stopped and this says why.
  const Status& start_status() const { return start_status_; }

  int64_t pending() const { return pending_.load(std::memory_order_relaxed); }

 private:
  struct Decision {
    bool ready = false;
    size_t count = 0;  // requests to take, in priority order
    int64_t units = 0;
    const char* reason = "";
    Clock::time_point wake = Clock::time_point::max();
  };

  void worker_loop();
  Decision decide(Clock::time_point now) const;
  std::vector<PendingRequest> take(size_t count);
  void collect_expired(Clock::time_point now, std::vector<PendingRequest>& expired);

  const std::string label_;
  const BatchingConfig config_;
  const RunBatch run_;
  const Expire expire_;
  const bool trace_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint32_t, std::deque<PendingRequest>> queues_;  // by effective priority
  size_t queued_ = 0;
  size_t with_deadline_ = 0;
  bool stopping_ = false;
  std::atomic<int64_t> pending_{0};
  std::vector<std::thread> workers_;
  std::once_flag joined_;
  Status start_status_;
};

}  // namespace kiln::server
