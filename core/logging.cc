// SPDX-License-Identifier: Apache-2.0
// The log sink, level and default stderr writer.
#include "core/logging.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>

#include "core/env.h"

namespace kiln {

namespace {
std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
std::shared_ptr<LogSink>& sink_slot() {
  static std::shared_ptr<LogSink> sink;
  return sink;
}
std::atomic<int>& level_slot() {
  static std::atomic<int> level{
      static_cast<int>(parse_log_level(env_flag_string(EnvFlag::kLogLevel), LogLevel::kWarning))};
  return level;
}
}  // namespace

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "trace";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "?";
}

LogLevel parse_log_level(std::string_view name, LogLevel fallback) {
  for (LogLevel l : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                     LogLevel::kError, LogLevel::kOff}) {
    if (log_level_name(l) == name) return l;
  }
  if (name == "warn") return LogLevel::kWarning;
  return fallback;
}

std::string log_level_problem(std::string_view name) {
  for (const char* known : {"trace", "debug", "info", "warn", "warning", "error", "off"}) {
    if (name == known) return "";
  }
  return fmt::format(
      "unknown log level \"{}\"; expected one of trace, debug, info, warn (or warning), error, off",
      name);
}

void set_log_sink(LogSink sink) {
  std::lock_guard lock(sink_mutex());
  sink_slot() = sink ? std::make_shared<LogSink>(std::move(sink)) : nullptr;
}

void set_log_level(LogLevel level) {
  level_slot().store(static_cast<int>(level));
}
LogLevel log_level() {
  return static_cast<LogLevel>(level_slot().load(std::memory_order_relaxed));
}

void log_message(LogLevel level, std::string_view message) {
  if (log_enabled(level)) log_unfiltered(level, message);
}

void log_unfiltered(LogLevel level, std::string_view message) {
  std::shared_ptr<LogSink> sink;
  {
    std::lock_guard lock(sink_mutex());
    sink = sink_slot();
  }
  if (sink) {
    (*sink)(level, message);
    return;
  }
  std::fprintf(stderr, "kiln %s: %.*s\n", log_level_name(level).data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace kiln
