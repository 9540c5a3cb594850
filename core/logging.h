// SPDX-License-Identifier: Apache-2.0
// Logging through a sink the host installs (the CLI and server install spdlog); libraries never
// print.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>

namespace kiln {

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarning, kError, kOff };

// "trace", "debug", "info", "warning", "error", "off".
std::string_view log_level_name(LogLevel level);
// Parses the names above (and "warn"); falls back to `fallback` for anything else.
LogLevel parse_log_level(std::string_view name, LogLevel fallback);
// What is wrong with `name` as a log level ("unknown log level ...; expected one of ..."), or ""
// for a name parse_log_level takes: for the hosts that read KILN_LOG_LEVEL to say so, where the
// library quietly falls back to warnings.
std::string log_level_problem(std::string_view name);

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Installs the sink that receives every message at or above the current level. Passing an empty
// function restores the default sink, which writes "kiln <level>: message" lines to stderr.
// Thread-safe; a sink must itself be safe to call from several threads.
void set_log_sink(LogSink sink);
// The level below which messages are dropped; initialised from KILN_LOG_LEVEL (default "warning").
void set_log_level(LogLevel level);
LogLevel log_level();

inline bool log_enabled(LogLevel level) {
  return level >= log_level();
}
void log_message(LogLevel level, std::string_view message);
// Sends a message to the sink whatever the level: for output a named trace switch asked for
// (KILN_TRACE_PASSES, KILN_TRACE_BATCHER).
void log_unfiltered(LogLevel level, std::string_view message);

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (!log_enabled(level)) return;
  log_message(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln
