// SPDX-License-Identifier: Apache-2.0
// Per-model statistics: counts, queue and compute times, batch sizes (the statistics extension
// and the Prometheus metrics both read them).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::server {

// A count and the total nanoseconds of the events counted (KServe's $duration_stat).
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// A cumulative histogram with fixed upper bounds (Prometheus "le" buckets; +Inf is implied).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // counts[i]: observations <= bounds[i]; one more for +Inf
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double value);
};

// Why a request failed, as the metrics' `reason` label says it.
enum class FailureReason : int { kRejected, kTimeout, kBackend, kInvalid, kUnavailable };
inline constexpr int kNumFailureReasons = 5;
const char* failure_reason_name(FailureReason reason);  // "rejected", "timeout", ...

// A snapshot of one model version's statistics.
struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;  // milliseconds since the epoch; 0 before the first
  uint64_t inference_count = 0;    // batch entries run (a request of batch 4 counts 4)
  uint64_t execution_count = 0;    // backend executions (batches)
  DurationStat success;            // request time from arrival to response
  DurationStat fail;
  DurationStat queue;
  DurationStat compute;
  uint64_t failures[kNumFailureReasons] = {};
  std::map<int64_t, DurationStat> batch_stats;  // compute time per executed batch size
  Histogram queue_us;
  Histogram compute_us;
  Histogram batch_size;
  int64_t pending = 0;
};

// Collects one model version's statistics from its instance threads.
class StatsRecorder {
 public:
  StatsRecorder(std::string name, std::string version);

  void record_batch(int64_t batch_size, uint64_t compute_ns);
  void record_success(uint64_t queue_ns, uint64_t total_ns);
  void record_failure(FailureReason reason, uint64_t total_ns);
  ModelStatistics snapshot() const;

 private:
  mutable std::mutex mutex_;
  ModelStatistics stats_;
};

}  // namespace kiln::server
