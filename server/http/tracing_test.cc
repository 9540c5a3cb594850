// SPDX-License-Identifier: Apache-2.0
// Traces end to end over real sockets: requests with and without a traceparent to a real server,
// whose spans the OTLP exporter sends to a collector listening in this process; the trace setting
// endpoints; a collector that fails or is down; and the separate metrics port.
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "server/core/test_repository.h"
#include "server/http/http_server.h"
#include "server/http/otlp_exporter.h"
#include "server/http/test_otlp_collector.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::HttpExchange;
using testing::ReceivedSpan;
using testing::TestCollector;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParentId[] = "00f067aa0ba902b7";
const std::string kParent = std::string("00-") + kTraceId + "-" + kParentId + "-01";
const std::string kBody =
    R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"INT32","data":[[1,2]]}]})";

// A server (echo models only) whose traces go to `collector_url`, with HTTP on a free port.
class Traced {
 public:
  explicit Traced(const std::string& collector_url,
                  TraceSettings settings = {TraceLevel::kTimestamps, 1, -1},
                  std::vector<std::string> restricted = {}) {
    root_ = fs::temp_directory_path() /
            ("kiln_trace_repo_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::remove_all(root_);
    testing::add_model(root_, "echo", "backend = \"echo\"\n");
    testing::add_model(root_, "echo2", "backend = \"echo\"\n");
    // Four requests sent together run as one batch: it goes when full, else after 5 s.
    testing::add_model(root_, "echo4",
                       "backend = \"echo\"\nmax_batch_size = 4\n[dynamic_batching]\n"
                       "max_queue_delay_microseconds = 5000000\n");
    OtlpExporterOptions eo;
    eo.url = collector_url;
    eo.flush_interval = milliseconds(20);
    eo.retry_backoff = milliseconds(10);
    eo.timeout = milliseconds(2000);
    eo.shutdown_timeout = milliseconds(500);
    eo.service_name = "kiln-test";
    exporter_ = OtlpExporter::start(eo).value();
    ServerOptions so{root_, true, {}};
    so.access = AccessPolicy::parse(restricted).value();
    so.tracer = Tracer::create({settings, exporter_, eo.url}).value();
    server_ = Server::create(so).value();
    HttpServerOptions ho;
    ho.address = "127.0.0.1";
    ho.port = 0;
    ho.threads = 2;
    http_ = HttpServer::start(server_.get(), ho).value();
  }
  ~Traced() {
    server_->shutdown();
    http_->stop();
    exporter_->stop();
    fs::remove_all(root_);
  }

  uint16_t port() const { return http_->port(); }
  Server& server() { return *server_; }
  OtlpExporter& exporter() { return *exporter_; }
  HttpExchange infer(const std::string& model,
                     const std::map<std::string, std::string>& headers = {},
                     const std::string& body = kBody) {
    return testing::http_exchange(port(), "POST", "/v2/models/" + model + "/infer", body, headers);
  }

 private:
  static inline int next_ = 0;
  fs::path root_;
  std::shared_ptr<OtlpExporter> exporter_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
};

std::string traces_url(const TestCollector& c) {
  return otlp_traces_url(c.base_url());
}

// The spans of `trace_id`, the server span first.
std::vector<ReceivedSpan> of_trace(const std::vector<ReceivedSpan>& spans,
                                   const std::string& trace_id) {
  std::vector<ReceivedSpan> out;
  for (const ReceivedSpan& s : spans) {
    if (s.trace_id != trace_id) continue;
    if (s.kind == 2) {
      out.insert(out.begin(), s);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

const ReceivedSpan* named(const std::vector<ReceivedSpan>& spans, const std::string& name) {
  for (const ReceivedSpan& s : spans) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The server span, then queue and compute inside it, children of it.
void expect_nested(const std::vector<ReceivedSpan>& trace) {
  ASSERT_EQ(trace.size(), 3u);
  const ReceivedSpan& server = trace[0];
  const ReceivedSpan* queue = named(trace, "queue");
  const ReceivedSpan* compute = named(trace, "compute");
  ASSERT_NE(queue, nullptr);
  ASSERT_NE(compute, nullptr);
  for (const ReceivedSpan* child : {queue, compute}) {
    EXPECT_EQ(child->parent_id, server.span_id);
    EXPECT_EQ(child->kind, 1);
    EXPECT_GE(child->start_ns, server.start_ns);
    EXPECT_LE(child->end_ns, server.end_ns);
    EXPECT_LE(child->start_ns, child->end_ns);
  }
  EXPECT_EQ(queue->end_ns, compute->start_ns);
}

TEST(Tracing, AnHttpRequestContinuesTheCallersTrace) {
  TestCollector collector;
  Traced t(traces_url(collector));
  HttpExchange r = t.infer("echo", {{"traceparent", kParent}, {"tracestate", "rojo=00f0"}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The response names the server span: the caller's trace id, a new span id, sampled.
  const std::string back = r.header("traceparent");
  ASSERT_EQ(back.size(), 55u) << back;
  EXPECT_EQ(back.substr(0, 36), std::string("00-") + kTraceId + "-");
  EXPECT_NE(back.substr(36, 16), kParentId);
  EXPECT_EQ(back.substr(52), "-01");
  std::vector<ReceivedSpan> trace =
      of_trace(collector.wait_for([](const auto& s) { return of_trace(s, kTraceId).size() >= 3; }),
               kTraceId);
  ASSERT_EQ(trace.size(), 3u);
  const ReceivedSpan& server = trace[0];
  EXPECT_EQ(server.service, "kiln-test");
  EXPECT_EQ(server.name, "POST /v2/models/{model}/infer");
  EXPECT_EQ(server.span_id, back.substr(36, 16));
  EXPECT_EQ(server.parent_id, kParentId);
  EXPECT_EQ(server.trace_state, "rojo=00f0");
  EXPECT_EQ(server.attribute("kiln.model.name"), "echo");
  EXPECT_EQ(server.attribute("kiln.model.version"), "1");
  EXPECT_EQ(server.attribute("kiln.protocol"), "http");
  EXPECT_EQ(server.attribute("http.response.status_code"), "200");
  EXPECT_EQ(server.status, 0);
  expect_nested(trace);
  EXPECT_EQ(named(trace, "compute")->attribute("kiln.batch.requests"), "1");
}

TEST(Tracing, WithoutATraceparentANewTraceStarts) {
  TestCollector collector;
  Traced t(traces_url(collector));
  HttpExchange r = t.infer("echo");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string back = r.header("traceparent");
  ASSERT_EQ(back.size(), 55u);
  const std::string trace_id = back.substr(3, 32);
  std::vector<ReceivedSpan> trace =
      of_trace(collector.wait_for([&](const auto& s) { return of_trace(s, trace_id).size() >= 3; }),
               trace_id);
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace[0].parent_id, "");  // a root
  expect_nested(trace);
}

TEST(Tracing, AnInvalidTraceparentIsIgnoredNeverAnError) {
  TestCollector collector;
  Traced t(traces_url(collector));
  std::string upper = kParent;
  upper[3] = 'B';  // hex must be lower case
  for (const std::string& bad :
       {upper, std::string("ff") + kParent.substr(2), kParent.substr(0, 54),
        std::string("00-") + std::string(32, '0') + "-" + kParentId + "-01"}) {
    HttpExchange r = t.infer("echo", {{"traceparent", bad}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.header("traceparent").substr(3, 32), kTraceId) << bad;
    EXPECT_EQ(r.header("traceparent").substr(52), "-01");  // a new trace, sampled (rate 1)
  }
}

TEST(Tracing, FailuresAreTracedWithTheirStatus) {
  TestCollector collector;
  Traced t(traces_url(collector));
  HttpExchange r = t.infer("nope", {{"traceparent", kParent}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("traceparent").substr(3, 32), kTraceId);
  std::vector<ReceivedSpan> trace = of_trace(
      collector.wait_for([](const auto& s) { return !of_trace(s, kTraceId).empty(); }), kTraceId);
  ASSERT_EQ(trace.size(), 1u);  // it never reached a queue
  EXPECT_EQ(trace[0].status, 2);
  EXPECT_NE(trace[0].status_message.find("\"nope\" does not exist"), std::string::npos)
      << trace[0].status_message;
  EXPECT_EQ(trace[0].attribute("http.response.status_code"), "404");
}

TEST(Tracing, EveryRequestOfABatchRecordsTheBatchsCompute) {
  TestCollector collector;
  Traced t(traces_url(collector));
  std::vector<std::future<HttpExchange>> answers;
  for (int i = 0; i < 4; ++i) {
    answers.push_back(std::async(std::launch::async, [&t] { return t.infer("echo4"); }));
  }
  std::vector<std::string> ids;
  for (auto& a : answers) {
    HttpExchange r = a.get();
    ASSERT_EQ(r.status, 200) << r.body;
    ids.push_back(r.header("traceparent").substr(3, 32));
  }
  std::vector<ReceivedSpan> spans = collector.wait_for([&](const auto& s) {
    for (const std::string& id : ids) {
      if (of_trace(s, id).size() < 3) return false;
    }
    return true;
  });
  std::set<std::pair<uint64_t, uint64_t>> computes;
  for (const std::string& id : ids) {
    std::vector<ReceivedSpan> trace = of_trace(spans, id);
    expect_nested(trace);
    ASSERT_EQ(trace.size(), 3u);
    const ReceivedSpan* compute = named(trace, "compute");
    EXPECT_EQ(compute->attribute("kiln.batch.requests"), "4");
    EXPECT_EQ(compute->attribute("kiln.batch.size"), "4");
    computes.insert({compute->start_ns, compute->end_ns});
  }
  EXPECT_EQ(ids.size(), std::set<std::string>(ids.begin(), ids.end()).size());
  EXPECT_EQ(computes.size(), 1u);  // one batch: the same compute in every trace
}

TEST(Tracing, TheRateSamplesOneNewTraceInN) {
  TestCollector collector;
  Traced t(traces_url(collector), {TraceLevel::kTimestamps, 5, -1});
  std::set<std::string> sampled, all;
  for (int i = 0; i < 23; ++i) {
    HttpExchange r = t.infer("echo");
    ASSERT_EQ(r.status, 200);
    const std::string back = r.header("traceparent");
    all.insert(back.substr(3, 32));
    if (back.substr(52) == "-01") sampled.insert(back.substr(3, 32));
  }
  EXPECT_EQ(all.size(), 23u);
  EXPECT_EQ(sampled.size(), 5u);  // the 1st, 6th, 11th, 16th and 21st
  std::vector<ReceivedSpan> spans =
      collector.wait_for([](const auto& s) { return s.size() >= 15; });
  t.exporter().stop();
  std::set<std::string> exported;
  for (const ReceivedSpan& s : collector.spans()) exported.insert(s.trace_id);
  EXPECT_EQ(exported, sampled);
  EXPECT_EQ(collector.spans().size(), 15u);
  // A caller's sampled flag wins over the rate.
  HttpExchange r = t.infer("echo", {{"traceparent", kParent}});
  EXPECT_EQ(r.header("traceparent").substr(52), "-01");
}

TEST(Tracing, TraceSettingsRoundTripAndRefuseBadValues) {
  TestCollector collector;
  Traced t(traces_url(collector), {TraceLevel::kTimestamps, 1000, -1});
  HttpExchange g = testing::http_exchange(t.port(), "GET", "/v2/trace/setting");
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(g.body,
            "{\"log_frequency\":\"0\",\"trace_count\":\"-1\",\"trace_file\":\"\",\"trace_level\":"
            "[\"TIMESTAMPS\"],\"trace_mode\":\"opentelemetry\",\"trace_rate\":\"1000\",\"url\":\"" +
                traces_url(collector) + "\"}");
  HttpExchange p = testing::http_exchange(t.port(), "POST", "/v2/trace/setting",
                                          R"({"trace_rate":"10","trace_count":7})");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_NE(p.body.find("\"trace_rate\":\"10\""), std::string::npos) << p.body;
  EXPECT_NE(p.body.find("\"trace_count\":\"7\""), std::string::npos) << p.body;
  EXPECT_EQ(testing::http_exchange(t.port(), "GET", "/v2/trace/setting").body, p.body);

  // A model's own level overrides the global one; null gives it back.
  p = testing::http_exchange(t.port(), "POST", "/v2/models/echo/trace/setting",
                             R"({"trace_level":["OFF"]})");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_NE(p.body.find("\"trace_level\":[\"OFF\"]"), std::string::npos) << p.body;
  EXPECT_NE(p.body.find("\"trace_rate\":\"10\""), std::string::npos) << p.body;  // the global
  EXPECT_EQ(t.infer("echo", {{"traceparent", kParent}}).header("traceparent"), "");
  EXPECT_NE(t.infer("echo2", {{"traceparent", kParent}}).header("traceparent"), "");
  p = testing::http_exchange(t.port(), "POST", "/v2/models/echo/trace/setting",
                             R"({"trace_level":null})");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_NE(p.body.find("\"trace_level\":[\"TIMESTAMPS\"]"), std::string::npos) << p.body;
  EXPECT_NE(t.infer("echo", {{"traceparent", kParent}}).header("traceparent"), "");

  struct Bad {
    std::string target, body;
    int status;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"/v2/trace/setting", R"({"trace_rate":"0"})", 400, "trace_rate"},
           {"/v2/trace/setting", R"({"trace_rate":"ten"})", 400, "ten"},
           {"/v2/trace/setting", R"({"trace_count":"-5"})", 400, "trace_count"},
           {"/v2/trace/setting", R"({"trace_level":["TENSORS"]})", 400, "TENSORS"},
           {"/v2/trace/setting", R"({"trace_level":null})", 400, "cannot be cleared"},
           {"/v2/trace/setting", R"({"trace_file":"/tmp/x.json"})", 400, "OTLP"},
           {"/v2/trace/setting", R"({"trace_rate":1.5})", 400, "trace_rate"},
           {"/v2/trace/setting", R"({"bogus":"1"})", 400, "bogus"},
           {"/v2/trace/setting", R"(["trace_rate"])", 400, "JSON object"},
           {"/v2/trace/setting", R"({"trace_rate":)", 400, "not valid JSON"},
           {"/v2/models/nope/trace/setting", R"({"trace_rate":"5"})", 404, "nope"},
       }) {
    HttpExchange r = testing::http_exchange(t.port(), "POST", b.target, b.body);
    EXPECT_EQ(r.status, b.status) << b.body << " -> " << r.body;
    EXPECT_NE(r.body.find(b.says), std::string::npos) << b.body << " -> " << r.body;
  }
  EXPECT_NE(testing::http_exchange(t.port(), "GET", "/v2/trace/setting")
                .body.find("\"trace_rate\":\"10\""),
            std::string::npos);  // the refused updates changed nothing
  EXPECT_EQ(testing::http_exchange(t.port(), "DELETE", "/v2/trace/setting").status, 405);
  // "trace" is one of the server's extensions.
  EXPECT_NE(testing::http_exchange(t.port(), "GET", "/v2").body.find("\"trace\""),
            std::string::npos);
}

TEST(Tracing, TraceSettingsAreInTheTraceRestrictedGroup) {
  TestCollector collector;
  Traced t(traces_url(collector), {}, {"trace:x-admin-key=secret"});
  HttpExchange r = testing::http_exchange(t.port(), "GET", "/v2/models/echo/trace/setting");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("trace endpoints need the header"), std::string::npos) << r.body;
  r = testing::http_exchange(t.port(), "GET", "/v2/trace/setting", "", {{"x-admin-key", "secret"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(t.infer("echo").status, 200);  // inference is not restricted
}

TEST(Tracing, RequestsNeverWaitForAFailingCollector) {
  // 503 twice, then 200: the spans get there on the retry.
  TestCollector flaky({503, 503});
  {
    Traced t(traces_url(flaky));
    EXPECT_EQ(t.infer("echo", {{"traceparent", kParent}}).status, 200);
    std::vector<ReceivedSpan> got =
        flaky.wait_for([](const auto& s) { return of_trace(s, kTraceId).size() >= 3; });
    EXPECT_EQ(of_trace(got, kTraceId).size(), 3u);
    EXPECT_EQ(t.exporter().stats().failed_requests, 2u);
  }
  // Nobody listens: every request still succeeds with its traceparent; the spans are dropped.
  const std::string down =
      "http://127.0.0.1:" + std::to_string(testing::closed_port()) + "/v1/traces";
  Traced t(down);
  for (int i = 0; i < 20; ++i) {
    HttpExchange r = t.infer("echo", {{"traceparent", kParent}});
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.header("traceparent").substr(3, 32), kTraceId);
  }
  t.exporter().stop();
  EXPECT_EQ(t.exporter().stats().exported, 0u);
  EXPECT_EQ(t.exporter().stats().dropped_failed + t.exporter().stats().dropped_full, 60u);
  HttpExchange m = testing::http_exchange(t.port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("kiln_trace_sampled 20\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("kiln_trace_spans_exported 0\n"), std::string::npos);
}

TEST(Tracing, TracingOffSendsNoTraceparent) {
  TestCollector collector;
  Traced t(traces_url(collector), {TraceLevel::kOff, 1, -1});
  HttpExchange r = t.infer("echo", {{"traceparent", kParent}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("traceparent"), "");
  t.exporter().stop();
  EXPECT_TRUE(collector.requests().empty());
}

// A reader of fixed gauges: stands in for NVML only to check the text.
class FixedGpus final : public GpuReader {
 public:
  std::vector<GpuSample> read() const override {
    return {{"GPU-1234", 0.25, uint64_t{80} << 30, uint64_t{3} << 30, 250.5}};
  }
};

TEST(MetricsPort, ServesMetricsAloneAndTheHttpPortKeepsThem) {
  TestCollector collector;
  Traced t(traces_url(collector));
  HttpServerOptions mo;
  mo.address = "127.0.0.1";
  mo.port = 0;
  mo.threads = 1;
  mo.metrics_only = true;
  mo.gpus = std::make_shared<FixedGpus>();
  auto metrics = HttpServer::start(&t.server(), mo);
  ASSERT_TRUE(metrics.ok()) << metrics.status().to_string();
  ASSERT_EQ(t.infer("echo").status, 200);
  HttpExchange m = testing::http_exchange((*metrics)->port(), "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.header("content-type"), "text/plain; version=0.0.4");
  EXPECT_NE(m.body.find("kiln_inference_request_success{model=\"echo\",version=\"1\"} 1\n"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("nv_gpu_utilization{gpu_uuid=\"GPU-1234\"} 0.25\n"), std::string::npos);
  HttpExchange other = testing::http_exchange((*metrics)->port(), "GET", "/v2/health/ready");
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.find("--metrics-port"), std::string::npos) << other.body;
  EXPECT_EQ(
      testing::http_exchange((*metrics)->port(), "POST", "/v2/models/echo/infer", kBody).status,
      404);
  EXPECT_EQ(testing::http_exchange((*metrics)->port(), "GET", "/").status, 404);  // no status page
  // The HTTP port still serves /metrics (without GPU gauges: it was given no reader).
  HttpExchange main = testing::http_exchange(t.port(), "GET", "/metrics");
  EXPECT_EQ(main.status, 200);
  EXPECT_NE(main.body.find("kiln_inference_request_success{model=\"echo\",version=\"1\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(main.body.find("nv_gpu"), std::string::npos);
  (*metrics)->stop();
}

}  // namespace
}  // namespace kiln::server::http
