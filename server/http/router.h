// SPDX-License-Identifier: Apache-2.0
// Router: the KServe v2 REST endpoints over plain request/response structs; the Beast transport
// (http_server.h) only moves bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/core/nvml.h"
#include "server/core/server.h"
#include "server/http/infer_json.h"

namespace kiln::server::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
  // The Inference-Header-Content-Length header, when present (already checked to be a number).
  std::optional<size_t> inference_header_length;
  // The headers the server's AccessPolicy reads (names in lower case), as sent; while tracing is
  // on also "traceparent" and "tracestate" (W3C Trace Context).
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
  // `metrics_only`: answer /metrics alone (the metrics port); `gpus`: whose gauges /metrics
  // shows (may be null).
  Router(Server* server, DecodeLimits limits, bool metrics_only = false,
         std::shared_ptr<const GpuReader> gpus = nullptr)
      : server_(server), limits_(limits), metrics_only_(metrics_only), gpus_(std::move(gpus)) {}

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
  // Triton's trace extension: GET or POST /v2[/models/NAME]/trace/setting.
  HttpResponse trace_setting(const HttpRequest& request, const std::string& model) const;

  Server* server_;
  DecodeLimits limits_;
  bool metrics_only_ = false;
  std::shared_ptr<const GpuReader> gpus_;
};

// The Prometheus text exposition of every model's statistics (per-model and version labels), the
// trace export counts when traces are exported, and the GPUs' gauges when `gpus` is given.
std::string prometheus_metrics(const Server& server, const GpuReader* gpus = nullptr);
// Triton's GPU series (nv_gpu_utilization, nv_gpu_memory_total_bytes, nv_gpu_memory_used_bytes,
// nv_gpu_power_usage) labelled gpu_uuid; a gauge no GPU reports is left out, and so is all of it
// for no GPUs.
std::string gpu_metrics(const std::vector<GpuSample>& gpus);

}  // namespace kiln::server::http
