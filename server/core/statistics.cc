// SPDX-License-Identifier: Apache-2.0
// Statistics recording: one mutex per model version; snapshots are copies.
#include "server/core/statistics.h"

#include <algorithm>
#include <chrono>

namespace kiln::server {

namespace {

std::vector<double> latency_bounds_us() {
  return {10,   25,    50,    100,   250,    500,    1000,   2500,
          5000, 10000, 25000, 50000, 100000, 250000, 1000000};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[i];
  sum += value;
  ++count;
}

const char* failure_reason_name(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected: return "rejected";
    case FailureReason::kTimeout: return "timeout";
    case FailureReason::kBackend: return "backend";
    case FailureReason::kInvalid: return "invalid";
    case FailureReason::kUnavailable: return "unavailable";
  }
  return "other";
}

StatsRecorder::StatsRecorder(std::string name, std::string version) {
  stats_.name = std::move(name);
  stats_.version = std::move(version);
  stats_.queue_us = Histogram(latency_bounds_us());
  stats_.compute_us = Histogram(latency_bounds_us());
  stats_.batch_size = Histogram({1, 2, 4, 8, 16, 32, 64, 128, 256});
}

void StatsRecorder::record_batch(int64_t batch_size, uint64_t compute_ns) {
  uint64_t now_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.last_inference_ms = now_ms;
  stats_.inference_count += static_cast<uint64_t>(batch_size);
  ++stats_.execution_count;
  stats_.compute.count += 1;
  stats_.compute.ns += compute_ns;
  DurationStat& b = stats_.batch_stats[batch_size];
  ++b.count;
  b.ns += compute_ns;
  stats_.compute_us.observe(static_cast<double>(compute_ns) / 1000.0);
  stats_.batch_size.observe(static_cast<double>(batch_size));
}

void StatsRecorder::record_success(uint64_t queue_ns, uint64_t total_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.success.count;
  stats_.success.ns += total_ns;
  ++stats_.queue.count;
  stats_.queue.ns += queue_ns;
  stats_.queue_us.observe(static_cast<double>(queue_ns) / 1000.0);
}

void StatsRecorder::record_failure(FailureReason reason, uint64_t total_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.fail.count;
  stats_.fail.ns += total_ns;
  ++stats_.failures[static_cast<int>(reason)];
}

ModelStatistics StatsRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace kiln::server
