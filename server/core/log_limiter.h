// SPDX-License-Identifier: Apache-2.0
// LogLimiter: at most one log line per interval for a condition a client can repeat at will (a
// failing accept, a flood of bad requests), with the count of the lines it held back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kiln::server {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::milliseconds interval = std::chrono::seconds(10))
      : interval_(interval.count()) {}

  // True when a line may be logged now; then *suppressed is how many were held back since the
  // last one. Thread-safe.
  bool allow(int64_t* suppressed) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = last_.load(std::memory_order_relaxed);
    if (last != kNever && now - last < interval_) {
      held_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!last_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      held_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    *suppressed = held_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  const int64_t interval_;
  std::atomic<int64_t> last_{kNever};
  std::atomic<int64_t> held_{0};
};

}  // namespace kiln::server
