// SPDX-License-Identifier: Apache-2.0
// Triton's trace extension bodies (/v2[/models/NAME]/trace/setting): settings to JSON and back.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "server/core/trace.h"

namespace kiln::server::http {

// {"trace_level":["TIMESTAMPS"],"trace_rate":"1000",...}: "trace_level" as an array of strings,
// every other setting as one string.
std::string trace_settings_json(const TraceSettingValues& settings);

// A POST body: an object whose values are a string, an array of strings, an integer (taken as
// its decimal string) or null (clear a model's own value). An empty body changes nothing.
// Invalid argument naming the setting for any other value.
Result<TraceSettingUpdate> parse_trace_settings_json(std::string_view body);

// The "error" member of an error body ({"error":"..."}), or the body itself when it has none.
std::string error_body_message(std::string_view body);

}  // namespace kiln::server::http
