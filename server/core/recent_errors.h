// SPDX-License-Identifier: Apache-2.0
// RecentErrors: the server's latest failed requests and model loads, in a bounded ring that any
// thread may add to (the status page shows them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::server {

enum class ErrorKind { kRequest, kLoad };
// "request" or "load".
std::string_view error_kind_name(ErrorKind kind);

struct RecentError {
  uint64_t sequence = 0;  // 1 for the first error recorded, then counting up without gaps
  uint64_t time_ms = 0;   // milliseconds since the epoch
  ErrorKind kind = ErrorKind::kRequest;
  std::string model;    // as the request or load named it (at most kMaxModelBytes)
  std::string version;  // empty when none was asked for
  StatusCode code = StatusCode::kUnknown;
  std::string message;  // at most kMaxMessageBytes
};

// Keeps the last `capacity` errors; older ones are dropped (total() still counts them). Long
// names and messages are cut at a UTF-8 character boundary, with "..." after, so a client cannot
// make the record large. Thread-safe.
class RecentErrors {
 public:
  static constexpr size_t kDefaultCapacity = 64;
  static constexpr size_t kMaxMessageBytes = 1024;
  static constexpr size_t kMaxModelBytes = 256;

  // `capacity` must be positive.
  explicit RecentErrors(size_t capacity = kDefaultCapacity);

  // Records a failure (an ok `status` is ignored), timed now.
  void record(ErrorKind kind, std::string_view model, std::string_view version,
              const Status& status);
  // The kept errors, oldest first.
  std::vector<RecentError> snapshot() const;
  // How many errors were ever recorded: the sequence number of the newest.
  uint64_t total() const;
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<RecentError> ring_;  // ring_[(sequence - 1) % capacity_]
  uint64_t total_ = 0;
};

}  // namespace kiln::server
