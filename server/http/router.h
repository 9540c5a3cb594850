// SPDX-License-Identifier: Apache-2.0
// Router: the KServe v2 REST endpoints over plain request/response structs; the Beast transport
// (http_server.h) only moves bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/core/server.h"
#include "server/http/infer_json.h"

namespace kiln::server::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
  // The Inference-Header-Content-Length header, when present (already checked to be a number).
  std::optional<size_t> inference_header_length;
  // The headers the server's AccessPolicy reads (names in lower case), as sent.
  std::map<std::string, std::string, std::less<>> headers;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::optional<size_t> inference_header_length;
  // More header fields (the status page's Content-Security-Policy, Cache-Control, ...).
  std::vector<std::pair<std::string, std::string>> headers;
};

// HTTP status for a Status code: 400 invalid, 401 unauthenticated, 403 permission denied, 404 not
// found, 429 queue full, 503 unavailable or timed out, 501 unimplemented, 500 internal.
int http_status(StatusCode code);

class Router {
 public:
  Router(Server* server, DecodeLimits limits) : server_(server), limits_(limits) {}

  // Answers the request through `reply`, exactly once, from this thread or (for inference) a
  // model instance thread.
  void handle(HttpRequest&& request, std::function<void(HttpResponse)> reply) const;

 private:
  void infer(HttpRequest&& request, const std::string& model, const std::string& version,
             std::function<void(HttpResponse)> reply) const;
  // A raw binary request (Inference-Header-Content-Length: 0): the body is the bytes of the
  // model's one input, one batch entry.
  Result<InferenceRequest> raw_request(const std::string& body, const std::string& model,
                                       const std::string& version) const;

  Server* server_;
  DecodeLimits limits_;
};

// The Prometheus text exposition of every model's statistics (per-model and version labels).
std::string prometheus_metrics(const Server& server);

}  // namespace kiln::server::http
