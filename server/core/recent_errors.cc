// SPDX-License-Identifier: Apache-2.0
// The ring of recent errors.
#include "server/core/recent_errors.h"

#include <chrono>

namespace kiln::server {

namespace {

// `s` cut to at most `limit` bytes plus "...", never inside a UTF-8 sequence.
std::string bounded(std::string_view s, size_t limit) {
  if (s.size() <= limit) return std::string(s);
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end)) + "...";
}

}  // namespace

std::string_view error_kind_name(ErrorKind kind) {
  return kind == ErrorKind::kLoad ? "load" : "request";
}

RecentErrors::RecentErrors(size_t capacity) : capacity_(capacity) {
  KILN_CHECK(capacity > 0, "RecentErrors needs room for one error at least");
  ring_.reserve(capacity);
}

void RecentErrors::record(ErrorKind kind, std::string_view model, std::string_view version,
                          const Status& status) {
  if (status.ok()) return;
  RecentError e;
  e.time_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
  e.kind = kind;
  e.model = bounded(model, kMaxModelBytes);
  e.version = bounded(version, kMaxModelBytes);
  e.code = status.code();
  e.message = bounded(status.message(), kMaxMessageBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  e.sequence = ++total_;
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(e));
  } else {
    ring_[(e.sequence - 1) % capacity_] = std::move(e);
  }
}

std::vector<RecentError> RecentErrors::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RecentError> out;
  out.reserve(ring_.size());
  // The oldest kept error is the one after the newest, once the ring has wrapped.
  const size_t start = ring_.size() < capacity_ ? 0 : total_ % capacity_;
  for (size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(start + i) % ring_.size()]);
  return out;
}

uint64_t RecentErrors::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

}  // namespace kiln::server
