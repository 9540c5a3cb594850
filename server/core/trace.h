// SPDX-License-Identifier: Apache-2.0
// Request tracing (OpenTelemetry spans, Triton's trace settings): the Tracer decides which
// inference requests are traced, continues a caller's W3C trace, and hands each traced request's
// spans (the server span, its queue wait and its batch's compute) to a SpanSink (the OTLP
// exporter). Knows nothing of HTTP or gRPC: the transports name the protocol and its status.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "server/core/trace_context.h"
#include "server/core/types.h"

namespace kiln::server {

// OTLP's span kinds and status codes (their numbers are the protocol's).
enum class SpanKind : int { kInternal = 1, kServer = 2 };
enum class SpanStatus : int { kUnset = 0, kOk = 1, kError = 2 };

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct SpanAttribute {
  std::string key;
  AttributeValue value;
};

// One finished span, times in nanoseconds since the Unix epoch.
struct SpanRecord {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_id{};  // all zero: a root span
  std::string trace_state;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::vector<SpanAttribute> attributes;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

// What a sink did with the spans it was given.
struct SpanSinkStats {
  uint64_t exported = 0;         // spans the collector accepted
  uint64_t dropped_full = 0;     // spans that did not fit the sink's queue
  uint64_t dropped_failed = 0;   // spans whose export failed after every retry
  uint64_t failed_requests = 0;  // export requests that failed (each retry counts)
};

// Where finished spans go. submit() must never block a request: a sink that is full drops.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void submit(std::vector<SpanRecord> spans) = 0;
  virtual SpanSinkStats stats() const = 0;
};

// Triton's trace levels: OFF traces nothing, TIMESTAMPS records the spans (TENSORS is not
// supported).
enum class TraceLevel { kOff, kTimestamps };

struct TraceSettings {
  TraceLevel level = TraceLevel::kOff;
  // Triton's trace_rate: of the requests that start a new trace, the 1st, (rate+1)th, (2*rate+1)th,
  // ... are sampled. A request continuing a caller's trace follows the caller's sampled flag.
  int64_t rate = 1000;
  // Traces still to be sampled; -1 is no limit. Each sampled trace counts one down.
  int64_t count = -1;
};

// Settings as Triton's trace extension writes them: name -> values ("trace_level" may hold several,
// the others hold one).
using TraceSettingValues = std::map<std::string, std::vector<std::string>>;
// An update: a setting mapped to nullopt (JSON null) clears a model's own value, so the global
// one applies again.
using TraceSettingUpdate = std::map<std::string, std::optional<std::vector<std::string>>>;

// How the spans of one traced request are named: the protocol and its span name.
struct TraceProtocol {
  std::string_view name;       // "http" or "grpc"
  std::string_view span_name;  // e.g. "POST /v2/models/{model}/infer"
};

class Tracer;

// One traced inference request, from the transport's arrival to its answer. The transport
// hands timeline() to the request (InferenceRequest::timeline) and calls finish() once when it
// answers. Thread-safe between the model filling the timeline and finish(), which the model's
// callback orders.
class RequestTrace {
 public:
  RequestTrace(std::shared_ptr<SpanSink> sink, const TraceId& trace_id, const SpanId& parent_id,
               bool sampled, std::string trace_state, const TraceProtocol& protocol,
               std::string_view model);

  bool sampled() const { return sampled_; }
  const TraceId& trace_id() const { return trace_id_; }
  const SpanId& span_id() const { return span_id_; }
  // The traceparent naming the server span, for the response's header or metadata.
  const std::string& traceparent() const { return traceparent_; }
  RequestTimeline* timeline() { return &timeline_; }

  void add_attribute(std::string key, AttributeValue value);
  // Ends the server span with the protocol's status (`status_key` = `status_code`, e.g.
  // "http.response.status_code" = 200) and, for a failure, its message; a sampled trace hands its
  // spans to the sink. Only the first call counts.
  void finish(std::string_view status_key, int64_t status_code, std::string_view error);

 private:
  uint64_t unix_ns(std::chrono::steady_clock::time_point t) const;

  std::shared_ptr<SpanSink> sink_;
  const TraceId trace_id_;
  const SpanId span_id_;
  const SpanId parent_id_;
  const bool sampled_;
  const std::string trace_state_;
  const std::string span_name_;
  const std::string traceparent_;
  // The system clock minus the steady clock, in nanoseconds (see clock_offset_ns in trace.cc).
  const int64_t clock_offset_ns_;
  const std::chrono::steady_clock::time_point start_steady_;
  std::vector<SpanAttribute> attributes_;
  RequestTimeline timeline_;
  std::atomic<bool> finished_{false};
};

// Counts for /metrics: traces sampled, and what the sink did with their spans.
struct TraceCounters {
  uint64_t sampled = 0;
  SpanSinkStats sink;
};

struct TracerOptions {
  TraceSettings settings;
  // Where sampled spans go; without one a level other than OFF is refused.
  std::shared_ptr<SpanSink> sink;
  // The collector's URL, as the settings show it ("url").
  std::string endpoint;
};

class Tracer {
 public:
  // Invalid argument naming the setting for a rate below 1, a count below -1, or a level other
  // than OFF without a sink.
  static Result<std::shared_ptr<Tracer>> create(TracerOptions options);

  // Whether any request may be traced (the global level or a model's is not OFF): the one check
  // on every request's path while tracing is off.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // A trace for a request to `model`, or null when its level is OFF. `traceparent` and
  // `tracestate` are the request's headers (empty when absent): a valid traceparent is continued
  // (its trace id, its span as the parent, its sampled flag); an invalid one is ignored and a new
  // trace starts, sampled by the rate. Either way trace_count bounds the sampled traces.
  std::shared_ptr<RequestTrace> start(std::string_view model, const TraceProtocol& protocol,
                                      std::string_view traceparent, std::string_view tracestate);

  // The settings in force globally (model empty) or for a model (its own values over the global
  // ones), as Triton's GET /v2[/models/NAME]/trace/setting answers.
  TraceSettingValues settings(const std::string& model = "") const;
  // Applies an update (every setting checked before any changes) and returns settings(model).
  // Invalid argument naming the setting and what it takes; failed precondition for a level other
  // than OFF without a sink.
  Result<TraceSettingValues> update(const std::string& model, const TraceSettingUpdate& update);

  TraceCounters counters() const;
  // Whether sampled spans go anywhere (an exporter was given).
  bool has_sink() const { return sink_ != nullptr; }

 private:
  struct ModelSettings {
    std::optional<TraceLevel> level;
    std::optional<int64_t> rate;
    std::optional<int64_t> count;  // the model's own remaining count
    uint64_t seen = 0;             // new traces asked for, for the rate
  };

  explicit Tracer(TracerOptions options);
  void refresh_enabled();  // callers hold mutex_

  const std::shared_ptr<SpanSink> sink_;
  const std::string endpoint_;
  mutable std::mutex mutex_;
  TraceSettings global_;
  uint64_t global_seen_ = 0;
  std::map<std::string, ModelSettings, std::less<>> models_;
  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> sampled_{0};
};

// "OFF", "TIMESTAMPS".
std::string_view trace_level_name(TraceLevel level);

}  // namespace kiln::server
