// SPDX-License-Identifier: Apache-2.0
// OtlpExporter: sends finished spans to an OpenTelemetry collector over OTLP/HTTP with the JSON
// encoding (POST .../v1/traces), batched by a background thread from a bounded queue.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/core/trace.h"

namespace kiln::server::http {

struct OtlpExporterOptions {
  // The full URL spans are POSTed to: http://HOST[:PORT]/PATH, or https:// (the collector's
  // certificate must chain to `ca_file`, else to the system's CAs, and name the host).
  std::string url;
  std::string ca_file;
  std::string service_name = "kiln";  // the resource's service.name
  // Spans waiting to be sent at most; more are dropped (and counted), never waited for.
  size_t max_queue_spans = 4096;
  // Spans per request at most; a smaller batch goes when `flush_interval` has passed.
  size_t max_batch_spans = 512;
  std::chrono::milliseconds flush_interval{1000};
  // A batch that fails with a connection error, a timeout, 429 or 5xx is sent again up to this
  // many times, after `retry_backoff`, doubling each time; then it is dropped (and counted).
  int max_retries = 3;
  std::chrono::milliseconds retry_backoff{100};
  // One attempt (resolve, connect, send, answer) at most.
  std::chrono::milliseconds timeout{5000};
  // stop() sends what is queued within this time; what is left then is dropped.
  std::chrono::milliseconds shutdown_timeout{5000};
};

// `base` + "/v1/traces" (OTEL_EXPORTER_OTLP_ENDPOINT's meaning), a trailing '/' of base dropped.
std::string otlp_traces_url(std::string_view base);

// The OTLP JSON body (ExportTraceServiceRequest) for `spans` of one resource.
std::string otlp_traces_json(const std::vector<SpanRecord>& spans, std::string_view service_name);

class OtlpExporter final : public SpanSink {
 public:
  // Checks the URL (invalid argument naming it) and starts the sending thread; nothing is
  // connected until the first batch.
  static Result<std::shared_ptr<OtlpExporter>> start(OtlpExporterOptions options);
  // stop().
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues the spans, or drops them all when they do not fit. Never blocks on the network.
  void submit(std::vector<SpanRecord> spans) override;
  SpanSinkStats stats() const override;

  // Sends what is queued (within shutdown_timeout) and joins the thread. Idempotent; spans
  // submitted afterwards are dropped.
  void stop();

  const std::string& url() const { return options_.url; }

  struct Target;

 private:
  OtlpExporter(OtlpExporterOptions options, std::unique_ptr<Target> target);
  void run();
  // Sends one batch with its retries; false when it was given up.
  bool send(const std::string& body, size_t spans);

  const OtlpExporterOptions options_;
  const std::unique_ptr<Target> target_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<SpanRecord> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_deadline_ =
      std::chrono::steady_clock::time_point::max();
  bool failing_ = false;  // in a spell of failures (logged at its start and its end)
  uint64_t dropped_in_spell_ = 0;
  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_full_{0};
  std::atomic<uint64_t> dropped_failed_{0};
  std::atomic<uint64_t> failed_requests_{0};
  std::once_flag stopped_;
  std::thread thread_;
};

}  // namespace kiln::server::http
