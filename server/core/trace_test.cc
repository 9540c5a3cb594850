// SPDX-License-Identifier: Apache-2.0
// The Tracer: Triton's rate and count, W3C continuation, per-model settings and their checks, and
// the spans one traced request gives (the exporter's end-to-end tests are in server/http).
#include "server/core/trace.h"

#include <gtest/gtest.h>

#include <thread>

namespace kiln::server {
namespace {

using std::chrono::microseconds;
using V = std::vector<std::string>;

// Keeps what it is given, in memory: the tracer's own destination for these tests.
class SpanStore final : public SpanSink {
 public:
  void submit(std::vector<SpanRecord> spans) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (SpanRecord& s : spans) spans_.push_back(std::move(s));
  }
  SpanSinkStats stats() const override { return {}; }
  std::vector<SpanRecord> spans() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return spans_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<SpanRecord> spans_;
};

constexpr TraceProtocol kHttp{"http", "POST /v2/models/{model}/infer"};
constexpr std::string_view kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr std::string_view kParentNotSampled =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

std::shared_ptr<Tracer> tracer(TraceSettings settings, std::shared_ptr<SpanSink> sink) {
  Result<std::shared_ptr<Tracer>> t = Tracer::create({settings, std::move(sink), "http://c:4318"});
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

const AttributeValue* attribute(const SpanRecord& s, std::string_view key) {
  for (const SpanAttribute& a : s.attributes) {
    if (a.key == key) return &a.value;
  }
  return nullptr;
}

TEST(Tracer, RateSamplesOneNewTraceInRate) {
  auto t = tracer({TraceLevel::kTimestamps, 4, -1}, std::make_shared<SpanStore>());
  std::vector<int> sampled;
  for (int i = 0; i < 20; ++i) {
    std::shared_ptr<RequestTrace> r = t->start("m", kHttp, "", "");
    ASSERT_NE(r, nullptr);
    if (r->sampled()) sampled.push_back(i);
    // Every request, sampled or not, gets a traceparent naming its span.
    EXPECT_EQ(r->traceparent().substr(52), r->sampled() ? "-01" : "-00");
  }
  EXPECT_EQ(sampled, (std::vector<int>{0, 4, 8, 12, 16}));
  EXPECT_EQ(t->counters().sampled, 5u);
}

TEST(Tracer, CountStopsSamplingAndCountsDown) {
  auto t = tracer({TraceLevel::kTimestamps, 1, 3}, std::make_shared<SpanStore>());
  int sampled = 0;
  for (int i = 0; i < 10; ++i) sampled += t->start("m", kHttp, "", "")->sampled() ? 1 : 0;
  EXPECT_EQ(sampled, 3);
  EXPECT_EQ(t->settings().at("trace_count"), std::vector<std::string>{"0"});
  // A caller's sampled trace is not sampled either once the count is spent.
  EXPECT_FALSE(t->start("m", kHttp, kParent, "")->sampled());
}

TEST(Tracer, ACallersTraceIsContinuedWithItsSampledFlag) {
  auto t = tracer({TraceLevel::kTimestamps, 1000, -1}, std::make_shared<SpanStore>());
  t->start("m", kHttp, "", "");  // the 1st new trace is sampled; the next 999 are not
  std::shared_ptr<RequestTrace> r = t->start("m", kHttp, kParent, "rojo=00f067aa0ba902b7");
  EXPECT_TRUE(r->sampled());
  EXPECT_EQ(to_hex(r->trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(r->traceparent().substr(0, 36), "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  EXPECT_NE(r->traceparent().substr(36, 16), "00f067aa0ba902b7");  // a span of its own
  auto rate_one = tracer({TraceLevel::kTimestamps, 1, -1}, std::make_shared<SpanStore>());
  EXPECT_FALSE(rate_one->start("m", kHttp, kParentNotSampled, "")->sampled());
}

TEST(Tracer, AnInvalidTraceparentStartsANewTrace) {
  auto t = tracer({TraceLevel::kTimestamps, 1, -1}, std::make_shared<SpanStore>());
  std::string upper(kParent);
  upper[4] = 'B';
  std::shared_ptr<RequestTrace> r = t->start("m", kHttp, upper, "");
  EXPECT_TRUE(r->sampled());
  EXPECT_NE(to_hex(r->trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(Tracer, LevelOffTracesNothingAndAModelMayTurnItOn) {
  auto store = std::make_shared<SpanStore>();
  auto t = tracer({TraceLevel::kOff, 1, -1}, store);
  EXPECT_FALSE(t->enabled());
  EXPECT_EQ(t->start("a", kHttp, kParent, ""), nullptr);
  Result<TraceSettingValues> a = t->update("a", {{"trace_level", V{"TIMESTAMPS"}}});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->at("trace_level"), std::vector<std::string>{"TIMESTAMPS"});
  EXPECT_EQ(t->settings().at("trace_level"), std::vector<std::string>{"OFF"});
  EXPECT_TRUE(t->enabled());
  EXPECT_NE(t->start("a", kHttp, "", ""), nullptr);
  EXPECT_EQ(t->start("b", kHttp, "", ""), nullptr);
  // null clears the model's own level: the global OFF applies again.
  ASSERT_TRUE(t->update("a", {{"trace_level", std::nullopt}}).ok());
  EXPECT_FALSE(t->enabled());
  EXPECT_EQ(t->start("a", kHttp, "", ""), nullptr);
}

TEST(Tracer, AModelsOwnRateAndCountDoNotTouchTheGlobalOnes) {
  auto t = tracer({TraceLevel::kTimestamps, 1, -1}, std::make_shared<SpanStore>());
  ASSERT_TRUE(t->update("slow", {{"trace_rate", V{"3"}}, {"trace_count", V{"2"}}}).ok());
  int slow = 0, other = 0;
  for (int i = 0; i < 9; ++i) {
    slow += t->start("slow", kHttp, "", "")->sampled() ? 1 : 0;
    other += t->start("other", kHttp, "", "")->sampled() ? 1 : 0;
  }
  EXPECT_EQ(slow, 2);   // 0, 3 (6 would be the 3rd; the count is 2)
  EXPECT_EQ(other, 9);  // the global rate 1
  EXPECT_EQ(t->settings("slow").at("trace_count"), std::vector<std::string>{"0"});
  EXPECT_EQ(t->settings("slow").at("trace_rate"), std::vector<std::string>{"3"});
  EXPECT_EQ(t->settings().at("trace_count"), std::vector<std::string>{"-1"});
  EXPECT_EQ(t->settings("other").at("trace_rate"), std::vector<std::string>{"1"});
}

TEST(Tracer, BadUpdatesAreRefusedWholeAndNameTheSetting) {
  auto t = tracer({TraceLevel::kTimestamps, 10, -1}, std::make_shared<SpanStore>());
  struct Case {
    TraceSettingUpdate update;
    std::string model;
    StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"trace_rate", V{"0"}}}, "", StatusCode::kInvalidArgument, "trace_rate"},
      {{{"trace_rate", V{"1e3"}}}, "", StatusCode::kInvalidArgument, "\"1e3\""},
      {{{"trace_rate", V{"5", "6"}}}, "", StatusCode::kInvalidArgument, "one value"},
      {{{"trace_count", V{"-2"}}}, "", StatusCode::kInvalidArgument, "trace_count"},
      {{{"trace_level", V{"TENSORS"}}}, "", StatusCode::kInvalidArgument, "TENSORS"},
      {{{"trace_level", V{"OFF", "TIMESTAMPS"}}}, "", StatusCode::kInvalidArgument, "OFF"},
      {{{"trace_level", V{"timestamps"}}}, "", StatusCode::kInvalidArgument, "timestamps"},
      {{{"trace_rate", std::nullopt}}, "", StatusCode::kInvalidArgument, "cannot be cleared"},
      {{{"log_frequency", V{"100"}}}, "", StatusCode::kInvalidArgument, "log_frequency"},
      {{{"trace_file", V{"/tmp/t.json"}}}, "", StatusCode::kInvalidArgument, "OTLP"},
      {{{"url", V{"http://elsewhere:4318"}}}, "", StatusCode::kInvalidArgument, "at start"},
      {{{"trace_buffer", V{"1"}}}, "m", StatusCode::kInvalidArgument, "trace_level, trace_rate"},
      // The valid rate is not applied when another setting of the update is bad.
      {{{"trace_rate", V{"5"}}, {"trace_count", V{"x"}}},
       "",
       StatusCode::kInvalidArgument,
       "trace_count"},
  };
  for (const Case& c : cases) {
    Result<TraceSettingValues> r = t->update(c.model, c.update);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), c.code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().to_string();
  }
  EXPECT_EQ(t->settings().at("trace_rate"), std::vector<std::string>{"10"});
  // What already holds may be given back unchanged (a client posting what GET returned).
  EXPECT_TRUE(t->update("", {{"log_frequency", V{"0"}},
                             {"trace_mode", V{"opentelemetry"}},
                             {"url", V{"http://c:4318"}}})
                  .ok());
}

TEST(Tracer, WithoutASinkTheLevelStaysOff) {
  EXPECT_FALSE(Tracer::create({{TraceLevel::kTimestamps, 1, -1}, nullptr, ""}).ok());
  Result<std::shared_ptr<Tracer>> t = Tracer::create({});
  ASSERT_TRUE(t.ok());
  Result<TraceSettingValues> r = (*t)->update("", {{"trace_level", V{"TIMESTAMPS"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("--trace-otlp-endpoint"), std::string::npos);
  EXPECT_EQ((*t)->settings(), (TraceSettingValues{{"trace_level", {"OFF"}},
                                                  {"trace_rate", {"1000"}},
                                                  {"trace_count", {"-1"}},
                                                  {"log_frequency", {"0"}},
                                                  {"trace_file", {""}},
                                                  {"trace_mode", {"opentelemetry"}},
                                                  {"url", {""}}}));
}

TEST(Tracer, ATracedRequestGivesItsServerQueueAndComputeSpans) {
  auto store = std::make_shared<SpanStore>();
  auto t = tracer({TraceLevel::kTimestamps, 1, -1}, store);
  std::shared_ptr<RequestTrace> r = t->start("mnist", kHttp, kParent, "rojo=1");
  ASSERT_TRUE(r->sampled());
  RequestTimeline* timeline = r->timeline();
  const auto queued = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(microseconds(2000));
  const auto compute_start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(microseconds(3000));
  const auto compute_end = std::chrono::steady_clock::now();
  timeline->queued = queued;
  timeline->compute_start = compute_start;
  timeline->compute_end = compute_end;
  timeline->batch_requests = 3;
  timeline->batch_size = 5;
  timeline->version = "2";
  r->finish("http.response.status_code", 200, "");
  r->finish("http.response.status_code", 500, "once only");
  std::vector<SpanRecord> spans = store->spans();
  ASSERT_EQ(spans.size(), 3u);
  const SpanRecord& server = spans[0];
  EXPECT_EQ(server.name, "POST /v2/models/{model}/infer");
  EXPECT_EQ(server.kind, SpanKind::kServer);
  EXPECT_EQ(to_hex(server.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(server.parent_id), "00f067aa0ba902b7");
  EXPECT_EQ(server.span_id, r->span_id());
  EXPECT_EQ(server.trace_state, "rojo=1");
  EXPECT_EQ(server.status, SpanStatus::kUnset);
  EXPECT_EQ(std::get<std::string>(*attribute(server, "kiln.model.name")), "mnist");
  EXPECT_EQ(std::get<std::string>(*attribute(server, "kiln.model.version")), "2");
  EXPECT_EQ(std::get<std::string>(*attribute(server, "kiln.protocol")), "http");
  EXPECT_EQ(std::get<int64_t>(*attribute(server, "http.response.status_code")), 200);
  const SpanRecord& queue = spans[1];
  const SpanRecord& compute = spans[2];
  EXPECT_EQ(queue.name, "queue");
  EXPECT_EQ(compute.name, "compute");
  for (const SpanRecord* child : {&queue, &compute}) {
    EXPECT_EQ(child->trace_id, server.trace_id);
    EXPECT_EQ(child->parent_id, server.span_id);
    EXPECT_NE(child->span_id, server.span_id);
    EXPECT_GE(child->start_ns, server.start_ns);
    EXPECT_LE(child->end_ns, server.end_ns);
  }
  EXPECT_EQ(queue.end_ns, compute.start_ns);
  EXPECT_GE(queue.end_ns - queue.start_ns, 2'000'000u);
  EXPECT_GE(compute.end_ns - compute.start_ns, 3'000'000u);
  EXPECT_EQ(std::get<int64_t>(*attribute(compute, "kiln.batch.size")), 5);
  EXPECT_EQ(std::get<int64_t>(*attribute(compute, "kiln.batch.requests")), 3);
}

TEST(Tracer, AFailedRequestsSpanSaysWhy) {
  auto store = std::make_shared<SpanStore>();
  auto t = tracer({TraceLevel::kTimestamps, 1, -1}, store);
  t->start("m", kHttp, "", "")
      ->finish("http.response.status_code", 404, "model \"m\" does not exist");
  std::vector<SpanRecord> spans = store->spans();
  ASSERT_EQ(spans.size(), 1u);  // it never ran: no queue or compute span
  EXPECT_EQ(spans[0].status, SpanStatus::kError);
  EXPECT_EQ(spans[0].status_message, "model \"m\" does not exist");
  EXPECT_EQ(std::get<int64_t>(*attribute(spans[0], "http.response.status_code")), 404);
  // Not sampled: nothing reaches the sink.
  auto none = tracer({TraceLevel::kTimestamps, 1, -1}, store);
  none->start("m", kHttp, kParentNotSampled, "")->finish("http.response.status_code", 200, "");
  EXPECT_EQ(store->spans().size(), 1u);
}

}  // namespace
}  // namespace kiln::server
