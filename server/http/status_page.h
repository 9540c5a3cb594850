// SPDX-License-Identifier: Apache-2.0
// The status page of `kiln serve` (status_page.html, built into the binary) and the JSON it
// polls, GET /v2/kiln/status: models and their states, statistics, recent errors.
#pragma once

#include <string>
#include <string_view>

#include "server/core/server.h"
#include "server/http/router.h"

namespace kiln::server::http {

// The page's bytes, as built in (status_page_embed.cmake writes this function).
std::string_view status_page_html();

// The Content-Security-Policy the page is served with: same-origin fetches, a data: icon, and
// the page's own inline <style> and <script> elements by their SHA-256; nothing else.
const std::string& status_page_csp();

// True for the page's path "/" and its JSON's "/v2/kiln/status" (a query is ignored).
bool is_status_page_target(std::string_view target);

// GET /: the page (text/html; charset=utf-8) with its CSP and hardening headers.
HttpResponse status_page_response();

// GET /v2/kiln/status, never cached:
//   {"server": {"name", "version", "ready"}, "time_ms",
//    "models": [{"name", "versions", "state", "failed", "reason", "backend", "platform"}],
//    "statistics": <the statistics extension's answer for every loaded version>,
//    "recent_errors": [{"sequence", "time_ms", "kind", "model", "version", "code",
//                       "http_status", "message"}] (oldest first), "errors_total"}
std::string status_json(const Server& server);
HttpResponse status_json_response(const Server& server);

}  // namespace kiln::server::http
