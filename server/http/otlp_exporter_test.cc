// SPDX-License-Identifier: Apache-2.0
// The OTLP exporter against a real collector socket: the JSON it sends, batching, retries on 503,
// a collector that is down or stuck, the flush on stop, and one log line per failure spell.
#include "server/http/otlp_exporter.h"

#include <gtest/gtest.h>

#include "core/logging.h"
#include "server/http/test_otlp_collector.h"

namespace kiln::server::http {
namespace {

using std::chrono::milliseconds;
using testing::ReceivedSpan;
using testing::TestCollector;

// `n` spans of one trace, the first a root, with attributes of each kind.
std::vector<SpanRecord> spans(int n, uint64_t start_ns = 1'700'000'000'000'000'000) {
  std::vector<SpanRecord> out(n);
  const TraceId trace = random_trace_id();
  for (int i = 0; i < n; ++i) {
    SpanRecord& s = out[i];
    s.trace_id = trace;
    s.span_id = random_span_id();
    if (i > 0) s.parent_id = out[0].span_id;
    s.name = i == 0 ? "POST /v2/models/{model}/infer" : "compute";
    s.kind = i == 0 ? SpanKind::kServer : SpanKind::kInternal;
    s.start_ns = start_ns + i;
    s.end_ns = start_ns + 1000 + i;
    s.attributes = {{"kiln.model.name", std::string("m\xff")},  // not UTF-8: replaced
                    {"kiln.batch.size", int64_t{9007199254740993}},
                    {"ok", true}};
  }
  return out;
}

OtlpExporterOptions options(const std::string& url) {
  OtlpExporterOptions o;
  o.url = url;
  o.flush_interval = milliseconds(20);
  o.retry_backoff = milliseconds(10);
  o.timeout = milliseconds(2000);
  return o;
}

std::shared_ptr<OtlpExporter> start(OtlpExporterOptions o) {
  Result<std::shared_ptr<OtlpExporter>> e = OtlpExporter::start(std::move(o));
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? *e : nullptr;
}

TEST(OtlpExporter, WritesOtlpJson) {
  std::vector<SpanRecord> in = spans(2);
  in[1].status = SpanStatus::kError;
  in[1].status_message = "model \"m\" failed";
  in[1].trace_state = "rojo=1";
  std::vector<ReceivedSpan> out = testing::parse_otlp_spans(otlp_traces_json(in, "svc"));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].service, "svc");
  EXPECT_EQ(out[0].trace_id, to_hex(in[0].trace_id));
  EXPECT_EQ(out[0].trace_id.size(), 32u);
  EXPECT_EQ(out[0].span_id, to_hex(in[0].span_id));
  EXPECT_EQ(out[0].parent_id, "");  // a root has no parentSpanId
  EXPECT_EQ(out[1].parent_id, to_hex(in[0].span_id));
  EXPECT_EQ(out[0].kind, 2);
  EXPECT_EQ(out[1].kind, 1);
  EXPECT_EQ(out[0].start_ns, 1'700'000'000'000'000'000u);  // exact: written as a string
  EXPECT_EQ(out[1].end_ns, 1'700'000'000'000'001'001u);
  EXPECT_EQ(out[0].attribute("kiln.batch.size"), "9007199254740993");  // past a double's 2^53
  EXPECT_EQ(out[0].attribute("kiln.model.name"), "m\xef\xbf\xbd");
  EXPECT_EQ(out[0].attribute("ok"), "true");
  EXPECT_EQ(out[0].status, 0);
  EXPECT_EQ(out[1].status, 2);
  EXPECT_EQ(out[1].status_message, "model \"m\" failed");
  EXPECT_EQ(out[1].trace_state, "rojo=1");
}

TEST(OtlpExporter, UrlsAreCheckedAndNamed) {
  EXPECT_EQ(otlp_traces_url("http://c:4318/"), "http://c:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("http://c:4318"), "http://c:4318/v1/traces");
  for (const char* bad : {"ftp://c:4318", "c:4318", "http://", "http://c:43x8/", "http://[::1/"}) {
    Result<std::shared_ptr<OtlpExporter>> e = OtlpExporter::start(options(bad));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(bad), std::string::npos) << e.status().message();
  }
  EXPECT_TRUE(OtlpExporter::start(options("http://[::1]:4318/v1/traces")).ok());
}

TEST(OtlpExporter, SendsBatchesToTheCollector) {
  TestCollector collector;
  OtlpExporterOptions o = options(otlp_traces_url(collector.base_url()));
  o.max_batch_spans = 4;
  auto e = start(o);
  for (int i = 0; i < 5; ++i) e->submit(spans(3));
  std::vector<ReceivedSpan> got = collector.wait_for([](const auto& s) { return s.size() >= 15; });
  EXPECT_EQ(got.size(), 15u);
  for (const testing::ReceivedRequest& r : collector.requests()) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/traces");
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_LE(testing::parse_otlp_spans(r.body).size(), 4u);  // the batch limit
  }
  e->stop();
  EXPECT_EQ(e->stats().exported, 15u);
  EXPECT_EQ(e->stats().dropped_full + e->stats().dropped_failed, 0u);
}

TEST(OtlpExporter, RetriesA503ThenSucceeds) {
  TestCollector collector({503, 503});
  std::vector<std::string> logged;
  std::mutex log_mutex;
  set_log_sink([&](LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> lock(log_mutex);
    logged.emplace_back(m);
  });
  auto e = start(options(otlp_traces_url(collector.base_url())));
  std::vector<SpanRecord> batch = spans(2);
  const std::string trace = to_hex(batch[0].trace_id);
  e->submit(std::move(batch));
  std::vector<ReceivedSpan> got = collector.wait_for([](const auto& s) { return s.size() >= 2; });
  e->stop();
  set_log_sink(nullptr);
  ASSERT_EQ(got.size(), 2u);  // once: the failed attempts' spans are not counted twice
  EXPECT_EQ(got[0].trace_id, trace);
  std::vector<testing::ReceivedRequest> requests = collector.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].answered, 503);
  EXPECT_EQ(requests[0].body, requests[2].body);
  EXPECT_EQ(e->stats().failed_requests, 2u);
  EXPECT_EQ(e->stats().exported, 2u);
  EXPECT_EQ(e->stats().dropped_failed, 0u);
  EXPECT_TRUE(logged.empty()) << logged[0];  // a retried batch that got through is no failure
}

TEST(OtlpExporter, ACollectorThatIsDownCostsTheSpansAndOneLogLine) {
  std::vector<std::string> logged;
  std::mutex log_mutex;
  set_log_sink([&](LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> lock(log_mutex);
    logged.emplace_back(m);
  });
  const std::string url =
      "http://127.0.0.1:" + std::to_string(testing::closed_port()) + "/v1/traces";
  OtlpExporterOptions o = options(url);
  o.max_retries = 2;
  auto e = start(o);
  for (int i = 0; i < 3; ++i) {
    e->submit(spans(2));
    // Each batch on its own (the flush interval is 20 ms), so there are three failures.
    while (e->stats().dropped_failed < 2u * (i + 1)) std::this_thread::sleep_for(milliseconds(5));
  }
  e->stop();
  set_log_sink(nullptr);
  EXPECT_EQ(e->stats().dropped_failed, 6u);
  EXPECT_EQ(e->stats().failed_requests, 9u);  // 3 batches x (1 + 2 retries)
  EXPECT_EQ(e->stats().exported, 0u);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find(url), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("3 attempt(s)"), std::string::npos) << logged[0];
}

TEST(OtlpExporter, AFailureSpellIsLoggedAtItsStartAndItsEnd) {
  // max_retries 0: each 503 fails its batch. Batches 1 and 2 fail, batch 3 gets through.
  TestCollector collector({503, 503});
  std::vector<std::string> logged;
  std::mutex log_mutex;
  set_log_sink([&](LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> lock(log_mutex);
    logged.emplace_back(m);
  });
  OtlpExporterOptions o = options(otlp_traces_url(collector.base_url()));
  o.max_retries = 0;
  auto e = start(o);
  for (int i = 0; i < 3; ++i) {
    e->submit(spans(1));
    while (collector.requests().size() < static_cast<size_t>(i + 1)) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  e->stop();
  set_log_sink(nullptr);
  EXPECT_EQ(e->stats().dropped_failed, 2u);
  EXPECT_EQ(e->stats().exported, 1u);
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[0].find("HTTP 503"), std::string::npos) << logged[0];
  EXPECT_NE(logged[1].find("works again (2 spans were dropped meanwhile)"), std::string::npos)
      << logged[1];
}

TEST(OtlpExporter, AStuckCollectorNeverBlocksSubmitTheQueueDrops) {
  // The collector holds every answer for 30 s; the queue takes 10 spans.
  TestCollector collector({}, milliseconds(30000));
  OtlpExporterOptions o = options(otlp_traces_url(collector.base_url()));
  o.max_queue_spans = 10;
  o.max_batch_spans = 2;
  o.shutdown_timeout = milliseconds(200);
  auto e = start(o);
  for (int i = 0; i < 40; ++i) e->submit(spans(1));
  // At most one batch of 2 is on the wire and 10 wait; the rest did not fit.
  EXPECT_GE(e->stats().dropped_full, 28u);
  e->stop();  // gives up on the stuck collector after shutdown_timeout
  const SpanSinkStats s = e->stats();
  EXPECT_EQ(s.exported, 0u);
  EXPECT_EQ(s.dropped_full + s.dropped_failed, 40u);
  e->submit(spans(1));  // after stop: dropped, not queued
  EXPECT_EQ(e->stats().dropped_full, s.dropped_full + 1);
}

TEST(OtlpExporter, StopFlushesWhatIsQueued) {
  TestCollector collector;
  OtlpExporterOptions o = options(otlp_traces_url(collector.base_url()));
  o.flush_interval = std::chrono::hours(1);
  o.max_batch_spans = 1000;
  auto e = start(o);
  e->submit(spans(5));
  EXPECT_TRUE(collector.requests().empty());
  e->stop();
  EXPECT_EQ(collector.spans().size(), 5u);
  EXPECT_EQ(e->stats().exported, 5u);
}

}  // namespace
}  // namespace kiln::server::http
