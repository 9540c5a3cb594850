// SPDX-License-Identifier: Apache-2.0
// traceparent parsing and writing, and random ids.
#include "server/core/trace_context.h"

#include <chrono>
#include <random>
#include <thread>

namespace kiln::server {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Only lower-case hex digits count: the spec makes upper case invalid.
int lower_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <size_t N>
std::string hex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

// Reads 2*N lower-case hex digits; false on any other character.
template <size_t N>
bool read_hex(std::string_view s, std::array<uint8_t, N>& out) {
  for (size_t i = 0; i < N; ++i) {
    const int hi = lower_hex(s[2 * i]);
    const int lo = lower_hex(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::mt19937_64& generator() {
  thread_local std::mt19937_64 rng([] {
    std::random_device device;
    std::seed_seq seed{
        device(),
        device(),
        device(),
        device(),
        static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id())),
        static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seed);
  }());
  return rng;
}

template <size_t N>
void fill_random(std::array<uint8_t, N>& out) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t v = generator()();
      for (size_t j = 0; j < 8 && i + j < N; ++j) out[i + j] = static_cast<uint8_t>(v >> (8 * j));
    }
  } while (all_zero(out));
}

}  // namespace

std::string to_hex(const TraceId& id) {
  return hex(id);
}

std::string to_hex(const SpanId& id) {
  return hex(id);
}

TraceId random_trace_id() {
  TraceId id;
  fill_random(id);
  return id;
}

SpanId random_span_id() {
  SpanId id;
  fill_random(id);
  return id;
}

std::optional<TraceParent> parse_traceparent(std::string_view v) {
  // version(2) - trace-id(32) - parent-id(16) - flags(2)
  constexpr size_t kLength = 55;
  if (v.size() < kLength || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{};
  std::array<uint8_t, 1> flags{};
  TraceParent out;
  if (!read_hex(v.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append "-..." fields.
  if (v.size() > kLength && (version[0] == 0 || v[kLength] != '-')) return std::nullopt;
  if (!read_hex(v.substr(3, 32), out.trace_id) || !read_hex(v.substr(36, 16), out.parent_id) ||
      !read_hex(v.substr(53, 2), flags)) {
    return std::nullopt;
  }
  if (all_zero(out.trace_id) || all_zero(out.parent_id)) return std::nullopt;
  out.sampled = (flags[0] & 1) != 0;
  return out;
}

std::string format_traceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled) {
  std::string out;
  out.reserve(55);
  out += "00-";
  out += hex(trace_id);
  out += '-';
  out += hex(span_id);
  out += sampled ? "-01" : "-00";
  return out;
}

std::string_view checked_tracestate(std::string_view value) {
  if (value.size() > 512) return {};
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return {};
  }
  return value;
}

}  // namespace kiln::server
