// SPDX-License-Identifier: Apache-2.0
// W3C Trace Context: the `traceparent` / `tracestate` values a request carries, parsed and
// written, and fresh random trace and span ids.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::server {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

// Lower-case hex, as traceparent and OTLP's JSON write ids.
std::string to_hex(const TraceId& id);
std::string to_hex(const SpanId& id);

// A non-zero random id (a per-thread generator seeded from std::random_device).
TraceId random_trace_id();
SpanId random_span_id();

// The caller's side of a trace: the trace a request belongs to and the span that sent it.
struct TraceParent {
  TraceId trace_id{};
  SpanId parent_id{};
  bool sampled = false;  // the caller's sampled flag (trace-flags bit 0)
};

// Parses a traceparent value per W3C Trace Context level 1: version-traceid-parentid-flags in
// lower-case hex. nullopt (to be ignored, never an error) for a wrong length or layout, version
// ff, an all-zero trace or parent id, or upper-case hex. A version above 00 may carry more
// fields after a '-', which are ignored.
std::optional<TraceParent> parse_traceparent(std::string_view value);

// "00-<trace id>-<span id>-01" (or -00 when not sampled).
std::string format_traceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled);

// The tracestate value to pass on: `value` when it is at most 512 characters of printable ASCII
// (the list's members are not looked into), else empty.
std::string_view checked_tracestate(std::string_view value);

}  // namespace kiln::server
