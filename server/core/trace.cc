// SPDX-License-Identifier: Apache-2.0
// The Tracer's sampling and settings, and a traced request's spans.
#include "server/core/trace.h"

#include <fmt/format.h>

#include <charconv>

namespace kiln::server {

namespace {

constexpr std::string_view kSettingNames =
    "trace_level, trace_rate, trace_count, log_frequency, trace_file, trace_mode, url";

Status bad_setting(std::string_view name, std::string_view why) {
  return invalid_argument_error(fmt::format("trace setting \"{}\": {}", name, why));
}

// The one value of a setting that takes one.
Result<std::string_view> single(std::string_view name, const std::vector<std::string>& values) {
  if (values.size() != 1) {
    return bad_setting(name, fmt::format("expected one value, got {}", values.size()));
  }
  return std::string_view(values[0]);
}

Result<int64_t> integer(std::string_view name, std::string_view text, int64_t least) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < least) {
    return bad_setting(name, fmt::format("\"{}\" is not an integer of at least {}", text, least));
  }
  return v;
}

Result<TraceLevel> parse_level(const std::vector<std::string>& values) {
  if (values.empty()) return bad_setting("trace_level", "give OFF or TIMESTAMPS");
  bool off = false, timestamps = false;
  for (const std::string& v : values) {
    if (v == "OFF") {
      off = true;
    } else if (v == "TIMESTAMPS") {
      timestamps = true;
    } else if (v == "TENSORS") {
      return bad_setting("trace_level",
                         "TENSORS is not supported (kiln records timestamps only); give OFF or "
                         "TIMESTAMPS");
    } else {
      return bad_setting("trace_level", fmt::format("\"{}\" is not OFF or TIMESTAMPS", v));
    }
  }
  if (off && timestamps) return bad_setting("trace_level", "OFF cannot go with TIMESTAMPS");
  return timestamps ? TraceLevel::kTimestamps : TraceLevel::kOff;
}

int64_t offset_now() {
  const auto system = std::chrono::system_clock::now().time_since_epoch();
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(system).count() -
         std::chrono::duration_cast<std::chrono::nanoseconds>(steady).count();
}

// Span times are steady-clock times plus this offset. One value serves every trace, so the
// requests of one batch carry the very same compute times, until the system clock is stepped by
// more than 1 ms (then the new offset is taken).
int64_t clock_offset_ns() {
  static std::atomic<int64_t> offset{offset_now()};
  const int64_t now = offset_now();
  const int64_t held = offset.load(std::memory_order_relaxed);
  if (now - held > 1'000'000 || held - now > 1'000'000) {
    offset.store(now, std::memory_order_relaxed);
    return now;
  }
  return held;
}

Status check_settings(const TraceSettings& s) {
  if (s.rate < 1) return bad_setting("trace_rate", fmt::format("{} is below 1", s.rate));
  if (s.count < -1) return bad_setting("trace_count", fmt::format("{} is below -1", s.count));
  return Status();
}

}  // namespace

std::string_view trace_level_name(TraceLevel level) {
  return level == TraceLevel::kOff ? "OFF" : "TIMESTAMPS";
}

RequestTrace::RequestTrace(std::shared_ptr<SpanSink> sink, const TraceId& trace_id,
                           const SpanId& parent_id, bool sampled, std::string trace_state,
                           const TraceProtocol& protocol, std::string_view model)
    : sink_(std::move(sink)),
      trace_id_(trace_id),
      span_id_(random_span_id()),
      parent_id_(parent_id),
      sampled_(sampled),
      trace_state_(std::move(trace_state)),
      span_name_(protocol.span_name),
      traceparent_(format_traceparent(trace_id_, span_id_, sampled_)),
      clock_offset_ns_(clock_offset_ns()),
      start_steady_(std::chrono::steady_clock::now()) {
  if (!sampled_) return;  // its spans go nowhere: no attributes to keep
  attributes_.push_back({"kiln.model.name", std::string(model)});
  attributes_.push_back({"kiln.protocol", std::string(protocol.name)});
}

void RequestTrace::add_attribute(std::string key, AttributeValue value) {
  if (sampled_) attributes_.push_back({std::move(key), std::move(value)});
}

uint64_t RequestTrace::unix_ns(std::chrono::steady_clock::time_point t) const {
  const int64_t steady =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return static_cast<uint64_t>(steady + clock_offset_ns_);
}

void RequestTrace::finish(std::string_view status_key, int64_t status_code,
                          std::string_view error) {
  if (finished_.exchange(true)) return;
  if (!sampled_ || sink_ == nullptr) return;
  const auto end = std::chrono::steady_clock::now();
  const bool ran = timeline_.batch_requests > 0;
  std::vector<SpanRecord> spans(ran ? 3 : 1);
  SpanRecord& server = spans[0];
  server.trace_id = trace_id_;
  server.span_id = span_id_;
  server.parent_id = parent_id_;
  server.trace_state = trace_state_;
  server.name = span_name_;
  server.kind = SpanKind::kServer;
  server.start_ns = unix_ns(start_steady_);
  server.end_ns = unix_ns(end);
  server.attributes = std::move(attributes_);
  if (!timeline_.version.empty()) {
    server.attributes.push_back({"kiln.model.version", timeline_.version});
  }
  server.attributes.push_back({std::string(status_key), status_code});
  if (!error.empty()) {
    server.status = SpanStatus::kError;
    server.status_message = std::string(error);
  }
  if (ran) {
    // The queue wait and the batch's compute, children of the server span.
    auto child = [&](SpanRecord& s, std::string name, std::chrono::steady_clock::time_point from,
                     std::chrono::steady_clock::time_point to) {
      s.trace_id = trace_id_;
      s.span_id = random_span_id();
      s.parent_id = span_id_;
      s.trace_state = trace_state_;
      s.name = std::move(name);
      s.kind = SpanKind::kInternal;
      s.start_ns = unix_ns(from);
      s.end_ns = unix_ns(to);
    };
    child(spans[1], "queue", timeline_.queued, timeline_.compute_start);
    child(spans[2], "compute", timeline_.compute_start, timeline_.compute_end);
    spans[2].attributes.push_back({"kiln.batch.size", timeline_.batch_size});
    spans[2].attributes.push_back({"kiln.batch.requests", timeline_.batch_requests});
  }
  sink_->submit(std::move(spans));
}

Tracer::Tracer(TracerOptions options)
    : sink_(std::move(options.sink)),
      endpoint_(std::move(options.endpoint)),
      global_(options.settings) {
  refresh_enabled();
}

Result<std::shared_ptr<Tracer>> Tracer::create(TracerOptions options) {
  KILN_RETURN_IF_ERROR(check_settings(options.settings));
  if (options.settings.level != TraceLevel::kOff && options.sink == nullptr) {
    return invalid_argument_error(
        "trace level TIMESTAMPS needs somewhere to send the spans; give --trace-otlp-endpoint "
        "(or OTEL_EXPORTER_OTLP_ENDPOINT)");
  }
  return std::shared_ptr<Tracer>(new Tracer(std::move(options)));
}

void Tracer::refresh_enabled() {
  bool on = global_.level != TraceLevel::kOff;
  for (const auto& [name, m] : models_) {
    on = on || m.level.value_or(global_.level) != TraceLevel::kOff;
  }
  enabled_.store(on, std::memory_order_relaxed);
}

std::shared_ptr<RequestTrace> Tracer::start(std::string_view model, const TraceProtocol& protocol,
                                            std::string_view traceparent,
                                            std::string_view tracestate) {
  const std::optional<TraceParent> parent =
      traceparent.empty() ? std::nullopt : parse_traceparent(traceparent);
  bool sampled = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = models_.find(model);
    ModelSettings* own = it == models_.end() ? nullptr : &it->second;
    const TraceLevel level = own && own->level ? *own->level : global_.level;
    if (level == TraceLevel::kOff) return nullptr;
    int64_t& remaining = own && own->count ? *own->count : global_.count;
    if (parent) {
      sampled = parent->sampled;
    } else {
      const int64_t rate = own && own->rate ? *own->rate : global_.rate;
      uint64_t& seen = own ? own->seen : global_seen_;
      sampled = seen % static_cast<uint64_t>(rate) == 0;
      ++seen;
    }
    if (sampled && remaining == 0) sampled = false;
    if (sampled && remaining > 0) --remaining;
  }
  if (sampled) sampled_.fetch_add(1, std::memory_order_relaxed);
  if (parent) {
    return std::make_shared<RequestTrace>(sink_, parent->trace_id, parent->parent_id, sampled,
                                          std::string(checked_tracestate(tracestate)), protocol,
                                          model);
  }
  return std::make_shared<RequestTrace>(sink_, random_trace_id(), SpanId{}, sampled, "", protocol,
                                        model);
}

TraceSettingValues Tracer::settings(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  TraceSettings s = global_;
  auto it = models_.find(model);
  if (!model.empty() && it != models_.end()) {
    s.level = it->second.level.value_or(s.level);
    s.rate = it->second.rate.value_or(s.rate);
    s.count = it->second.count.value_or(s.count);
  }
  return {{"trace_level", {std::string(trace_level_name(s.level))}},
          {"trace_rate", {std::to_string(s.rate)}},
          {"trace_count", {std::to_string(s.count)}},
          {"log_frequency", {"0"}},
          {"trace_file", {""}},
          {"trace_mode", {"opentelemetry"}},
          {"url", {endpoint_}}};
}

Result<TraceSettingValues> Tracer::update(const std::string& model,
                                          const TraceSettingUpdate& update) {
  std::optional<std::optional<TraceLevel>> level;
  std::optional<std::optional<int64_t>> rate, count;
  // Every setting is checked before anything changes.
  for (const auto& [name, values] : update) {
    if (!values && model.empty()) {
      return bad_setting(name,
                         "a global setting cannot be cleared (null clears a model's own value); "
                         "give a value");
    }
    if (name == "trace_level") {
      if (!values) {
        level.emplace(std::nullopt);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(TraceLevel l, parse_level(*values));
      if (l != TraceLevel::kOff && sink_ == nullptr) {
        return failed_precondition_error(
            "trace setting \"trace_level\": the server exports no traces (start kiln serve with "
            "--trace-otlp-endpoint), so it can only be OFF");
      }
      level.emplace(l);
    } else if (name == "trace_rate" || name == "trace_count") {
      const bool is_rate = name == "trace_rate";
      auto& target = is_rate ? rate : count;
      if (!values) {
        target.emplace(std::nullopt);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::string_view text, single(name, *values));
      KILN_ASSIGN_OR_RETURN(int64_t v, integer(name, text, is_rate ? 1 : -1));
      target.emplace(v);
    } else if (name == "log_frequency" || name == "trace_file" || name == "trace_mode" ||
               name == "url") {
      // Fixed by how kiln exports; accepted only when they say what already holds.
      const std::vector<std::string> now = settings().at(name);
      if (values && *values == now) continue;
      const char* why = name == "log_frequency"
                            ? "kiln writes no trace files; it exports spans over "
                              "OTLP in batches of its own, so it stays 0"
                        : name == "trace_file" ? "kiln writes no trace files; it exports spans "
                                                 "over OTLP (--trace-otlp-endpoint)"
                        : name == "trace_mode" ? "kiln traces only in OpenTelemetry mode"
                                               : "the collector's URL is set at start with "
                                                 "--trace-otlp-endpoint";
      return bad_setting(name, fmt::format("cannot be changed: {}", why));
    } else {
      return bad_setting(name, fmt::format("no such setting; the settings are {}", kSettingNames));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (model.empty()) {
      if (level) global_.level = **level;
      if (rate) global_.rate = **rate;
      if (count) global_.count = **count;
    } else {
      ModelSettings& m = models_[model];
      if (level) m.level = *level;
      if (rate) m.rate = *rate;
      if (count) m.count = *count;
      if (!m.level && !m.rate && !m.count) models_.erase(model);
    }
    refresh_enabled();
  }
  return settings(model);
}

TraceCounters Tracer::counters() const {
  TraceCounters c;
  c.sampled = sampled_.load(std::memory_order_relaxed);
  if (sink_) c.sink = sink_->stats();
  return c;
}

}  // namespace kiln::server
