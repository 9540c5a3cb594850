// SPDX-License-Identifier: Apache-2.0
// The dynamic batcher: instance threads share one queue and decide under its lock what to run.
#include "server/core/scheduler.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <limits>
#include <system_error>

#include "core/env.h"
#include "core/logging.h"

namespace kiln::server {

namespace {

uint32_t effective_priority(uint32_t priority) {
  return priority == 0 ? std::numeric_limits<uint32_t>::max() : priority;
}

}  // namespace

Scheduler::Scheduler(std::string label, BatchingConfig config, int64_t instances, RunBatch run,
                     Expire expire)
    : label_(std::move(label)),
      config_(std::move(config)),
      run_(std::move(run)),
      expire_(std::move(expire)),
      trace_(env_flag_bool(EnvFlag::kTraceBatcher)) {
  for (int64_t i = 0; i < std::max<int64_t>(1, instances); ++i) {
    // std::thread reports a thread the system refuses only by throwing; it must not escape (a
    // joinable thread destroyed during unwinding terminates the process).
    try {
      workers_.emplace_back([this] {
        // Named for profilers and CPU-time splits (bench/server); OpenMP threads it starts
        // inherit the name.
        pthread_setname_np(pthread_self(), "kiln-model");
        worker_loop();
      });
    } catch (const std::system_error& e) {
      start_status_ = resource_exhausted_error(
          fmt::format("model \"{}\": could not start instance thread {} of {}: {}; ask for fewer "
                      "instances",
                      label_, i + 1, instances, e.what()));
      stop();
      return;
    }
  }
}

Scheduler::~Scheduler() {
  stop();
}

Status Scheduler::enqueue(PendingRequest&& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      return unavailable_error(
          fmt::format("model \"{}\" is shutting down or unloading; retry later", label_));
    }
    if (config_.max_queue_size > 0 && queued_ >= static_cast<size_t>(config_.max_queue_size)) {
      return resource_exhausted_error(
          fmt::format("model \"{}\": the queue is full ({} requests waiting, max_queue_size {}); "
                      "retry later",
                      label_, queued_, config_.max_queue_size));
    }
    if (request.deadline != Clock::time_point::max()) ++with_deadline_;
    queues_[effective_priority(request.priority)].push_back(std::move(request));
    ++queued_;
    pending_.store(static_cast<int64_t>(queued_), std::memory_order_relaxed);
  }
  cv_.notify_one();
  return Status();
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::call_once(joined_, [this] {
    for (std::thread& t : workers_) t.join();
  });
}

void Scheduler::collect_expired(Clock::time_point now, std::vector<PendingRequest>& expired) {
  if (with_deadline_ == 0) return;
  for (auto& [priority, queue] : queues_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->deadline <= now) {
        expired.push_back(std::move(*it));
        it = queue.erase(it);
        --queued_;
        --with_deadline_;
      } else {
        ++it;
      }
    }
  }
  pending_.store(static_cast<int64_t>(queued_), std::memory_order_relaxed);
}

Scheduler::Decision Scheduler::decide(Clock::time_point now) const {
  Decision d;
  const int64_t max = config_.max_batch_size;
  Clock::time_point oldest = Clock::time_point::max();
  Clock::time_point earliest_deadline = Clock::time_point::max();
  bool more = false;  // a queued request did not fit
  for (const auto& [priority, queue] : queues_) {
    for (const PendingRequest& r : queue) {
      oldest = std::min(oldest, r.arrived);
      earliest_deadline = std::min(earliest_deadline, r.deadline);
      if (more) continue;
      if (max == 0) {
        if (d.count == 1) {
          more = true;
          continue;
        }
      } else if (d.units + r.batch_size > max) {
        more = true;
        continue;
      }
      ++d.count;
      d.units += r.batch_size;
    }
  }
  d.ready = true;
  if (max == 0) {
    d.reason = "no batching";
  } else if (d.units >= max || more) {
    d.reason = "full";
  } else if (stopping_) {
    d.reason = "draining";
  } else if (config_.max_queue_delay_microseconds == 0) {
    d.reason = "no delay";
  } else if (now >= oldest + std::chrono::microseconds(config_.max_queue_delay_microseconds)) {
    d.reason = "delay";
  } else {
    // The largest preferred size the queue can fill goes at once.
    int64_t best = 0;
    for (int64_t p : config_.preferred_batch_size) {
      if (p <= d.units) best = std::max(best, p);
    }
    if (best > 0) {
      d.reason = "preferred";
      d.count = 0;
      d.units = 0;
      for (const auto& [priority, queue] : queues_) {
        for (const PendingRequest& r : queue) {
          if (d.units + r.batch_size > best) break;
          ++d.count;
          d.units += r.batch_size;
        }
        if (d.units + 1 > best) break;
      }
      if (d.count == 0) d.ready = false;
    } else {
      d.ready = false;
    }
    if (!d.ready) {
      d.wake = std::min(oldest + std::chrono::microseconds(config_.max_queue_delay_microseconds),
                        earliest_deadline);
    }
  }
  return d;
}

std::vector<PendingRequest> Scheduler::take(size_t count) {
  std::vector<PendingRequest> batch;
  batch.reserve(count);
  for (auto it = queues_.begin(); it != queues_.end() && batch.size() < count;) {
    std::deque<PendingRequest>& queue = it->second;
    while (!queue.empty() && batch.size() < count) {
      if (queue.front().deadline != Clock::time_point::max()) --with_deadline_;
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    it = queue.empty() ? queues_.erase(it) : std::next(it);
  }
  queued_ -= batch.size();
  pending_.store(static_cast<int64_t>(queued_), std::memory_order_relaxed);
  return batch;
}

void Scheduler::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    Clock::time_point now = Clock::now();
    std::vector<PendingRequest> expired;
    collect_expired(now, expired);
    if (!expired.empty()) {
      lock.unlock();
      for (PendingRequest& r : expired) expire_(r);
      lock.lock();
      continue;
    }
    if (queued_ == 0) {
      if (stopping_) return;
      cv_.wait(lock);
      continue;
    }
    Decision d = decide(now);
    if (!d.ready) {
      cv_.wait_until(lock, d.wake);
      continue;
    }
    std::vector<PendingRequest> batch = take(d.count);
    const size_t left = queued_;
    lock.unlock();
    if (left > 0) cv_.notify_one();
    if (trace_) {
      log_unfiltered(LogLevel::kInfo,
                     fmt::format("batcher \"{}\": {} request(s), batch size {} ({}), {} waiting",
                                 label_, batch.size(), d.units, d.reason, left));
    }
    run_(batch);
    lock.lock();
  }
}

}  // namespace kiln::server
