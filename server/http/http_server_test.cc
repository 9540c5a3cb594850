// SPDX-License-Identifier: Apache-2.0
// The HTTP transport over real loopback sockets, driven by the C++ HttpClient and by curl: every
// endpoint, every bad input with its status, and many client threads at once.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "client/client_test_util.h"
#include "client/http_client.h"
#include "client/native_client.h"
#include "server/core/test_repository.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;
using client::HttpClient;
using client::HttpReply;

struct CurlResult {
  int status = -1;
  std::string body;
};

// Runs curl against the test server; `args` are curl options after the URL.
CurlResult curl(uint16_t port, const std::string& path, const std::string& args = "") {
  std::string cmd = "curl -s -S -w '\\n%{http_code}' " + args +
                    " 'http://127.0.0.1:" + std::to_string(port) + path + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  CurlResult r;
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  std::string out;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  size_t nl = out.rfind('\n');
  if (nl == std::string::npos) return r;
  r.status = std::atoi(out.c_str() + nl + 1);
  r.body = out.substr(0, nl);
  return r;
}

using client::testing::request;

Tensor image(uint32_t seed) {
  return testing::random_image(1, seed);
}

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(testing::make_test_repository("http"));
    fs::remove_all(*root_ / "broken");
    // Waits 1 s for a batch, and holds one request at most: the second is refused at once.
    testing::add_model(*root_, "tiny_queue",
                       "backend = \"echo\"\nmax_batch_size = 8\n[dynamic_batching]\n"
                       "max_queue_delay_microseconds = 1000000\nmax_queue_size = 1\n");
    ServerOptions so{*root_, true, {}};
    so.model_control = ModelControl::kExplicit;  // the tests load and unload over the network
    auto s = Server::create(so);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value().release();
    HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.threads = 4;
    o.max_body_bytes = 1 << 20;
    o.limits.max_elements = 1 << 18;
    auto h = HttpServer::start(server_, o);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    http_ = std::move(h).value().release();
  }
  static void TearDownTestSuite() {
    server_->shutdown();
    delete http_;
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }
  std::unique_ptr<HttpClient> client(client::HttpClientOptions o = {}) {
    auto c = HttpClient::create("http://127.0.0.1:" + std::to_string(http_->port()), o);
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  }
  uint16_t port() const { return http_->port(); }

  static Server* server_;
  static HttpServer* http_;
  static fs::path* root_;
};
Server* HttpTest::server_ = nullptr;
HttpServer* HttpTest::http_ = nullptr;
fs::path* HttpTest::root_ = nullptr;

// Whether a TCP connection to 127.0.0.1:`port` is accepted.
bool accepts_connections(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return connected;
}

TEST_F(HttpTest, StopClosesTheListeningSocketBeforeItReturns) {
  // With nothing in flight, stop() stopped the threads before they ran the posted close: the
  // port kept accepting connections until the object was destroyed.
  for (int round = 0; round < 20; ++round) {
    HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    auto h = HttpServer::start(server_, o);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    const uint16_t p = (*h)->port();
    ASSERT_TRUE(accepts_connections(p));
    (*h)->stop(std::chrono::milliseconds(100));
    EXPECT_FALSE(accepts_connections(p)) << "round " << round << ": port " << p;
  }
}

TEST_F(HttpTest, HealthAndMetadataWithTheClientAndCurl) {
  auto c = client();
  EXPECT_TRUE(c->server_live().value());
  EXPECT_TRUE(c->wait_until_server_ready(std::chrono::seconds(5)).ok());
  EXPECT_EQ(c->server_metadata()->name, "kiln");
  EXPECT_TRUE(c->model_ready("mnist").value());
  EXPECT_TRUE(c->model_ready("mnist", "1").value());
  EXPECT_EQ(c->model_ready("mnist", "2").status().code(), StatusCode::kNotFound);
  Result<ModelMetadata> md = c->model_metadata("mnist");
  ASSERT_TRUE(md.ok()) << md.status().to_string();
  EXPECT_EQ(md->inputs[0].name, "image");
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_EQ(md->outputs[0].name, "probabilities");

  EXPECT_EQ(curl(port(), "/v2/health/live").status, 200);
  EXPECT_EQ(curl(port(), "/v2/health/ready").status, 200);
  CurlResult meta = curl(port(), "/v2");
  EXPECT_EQ(meta.status, 200);
  EXPECT_NE(meta.body.find("\"binary_tensor_data\""), std::string::npos) << meta.body;
  CurlResult model = curl(port(), "/v2/models/mnist/versions/1");
  EXPECT_EQ(model.status, 200);
  EXPECT_NE(model.body.find("\"shape\":[-1,1,28,28]"), std::string::npos) << model.body;
  EXPECT_EQ(curl(port(), "/v2/models/mnist/ready").body, "{\"name\":\"mnist\",\"ready\":true}");
  CurlResult config = curl(port(), "/v2/models/mnist/config");
  EXPECT_EQ(config.status, 200);
  EXPECT_NE(config.body.find("\"max_batch_size\":4"), std::string::npos) << config.body;
  EXPECT_NE(config.body.find(
                "\"input\":[{\"name\":\"image\",\"data_type\":\"TYPE_FP32\",\"dims\":[1,28,28]}]"),
            std::string::npos)
      << config.body;
  EXPECT_NE(config.body.find("\"max_queue_delay_microseconds\":2000"), std::string::npos)
      << config.body;
  EXPECT_NE(config.body.find("\"target\":{\"string_value\":\"cpu\"}"), std::string::npos)
      << config.body;
}

TEST_F(HttpTest, JsonInferenceWithCurl) {
  CurlResult r =
      curl(port(), "/v2/models/echo/infer",
           "-X POST -H 'Content-Type: application/json' -d '{\"id\":\"c1\",\"inputs\":"
           "[{\"name\":\"x\",\"shape\":[2,2],\"datatype\":\"INT32\",\"data\":[[1,2],[3,4]]}]}'");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body,
            "{\"model_name\":\"echo\",\"model_version\":\"1\",\"id\":\"c1\",\"outputs\":[{\"name\":"
            "\"x\",\"datatype\":\"INT32\",\"shape\":[2,2],\"data\":[1,2,3,4]}]}");
}

TEST_F(HttpTest, LargeCurlBodiesDoNotWaitForExpectContinue) {
  // curl asks `Expect: 100-continue` for bodies over 1 KiB and waits a second for the answer.
  std::string data;
  for (int i = 0; i < 20000; ++i) data += (i ? ",1" : "1");
  std::filesystem::path file = *root_ / "big.json";
  std::ofstream(file) << R"({"inputs":[{"name":"x","shape":[20000],"datatype":"INT32","data":[)"
                      << data << "]}]}";
  auto start = std::chrono::steady_clock::now();
  CurlResult r = curl(port(), "/v2/models/echo/infer", "-X POST --data-binary @" + file.string());
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 200);
  EXPECT_LT(took, std::chrono::milliseconds(900));
}

TEST_F(HttpTest, BinaryInferenceMatchesTheInProcessResult) {
  client::NativeClient native(server_);
  for (bool binary : {true, false}) {
    client::HttpClientOptions o;
    o.binary_inputs = binary;
    o.binary_outputs = binary;
    auto c = client(o);
    for (uint32_t seed = 0; seed < 3; ++seed) {
      Tensor img = image(seed);
      Result<InferenceResponse> want = native.model_infer("mnist", request({{"image", img, {}}}));
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      Result<InferenceResponse> got =
          c->model_infer("mnist", request({{"image", img, {}}}, "id" + std::to_string(seed)));
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->model, "mnist");
      EXPECT_EQ(got->id, "id" + std::to_string(seed));
      ASSERT_EQ(got->outputs.size(), 1u);
      EXPECT_EQ(got->outputs[0].name, "probabilities");
      const Tensor& a = want->outputs[0].data;
      const Tensor& b = got->outputs[0].data;
      ASSERT_EQ(b.shape(), a.shape());
      for (int64_t i = 0; i < a.numel(); ++i) {
        // JSON carries floats as shortest round-trip decimals, so both paths are exact.
        EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]);
      }
    }
  }
}

void expect_status(const Result<HttpReply>& r, int status, const std::string& part) {
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_NE(r->body.find(part), std::string::npos) << "missing \"" << part << "\" in " << r->body;
  EXPECT_EQ(r->body.rfind("{\"error\":\"", 0), 0u) << r->body;
}

TEST_F(HttpTest, EveryBadInputGetsItsStatusAndAClearMessage) {
  auto c = client();
  auto post = [&](const std::string& path, const std::string& body) {
    return c->send("POST", path, body);
  };
  const std::string good_input =
      R"({"name":"image","shape":[1,1,28,28],"datatype":"FP32","data":[)" +
      [] {
        std::string s;
        for (int i = 0; i < 784; ++i) s += (i ? ",0" : "0");
        return s;
      }() +
      "]}";
  expect_status(post("/v2/models/nope/infer", R"({"inputs":[]})"), 404,
                "model \\\"nope\\\" does not exist");
  expect_status(post("/v2/models/mnist/versions/7/infer", "{\"inputs\":[" + good_input + "]}"), 404,
                "no version 7");
  expect_status(post("/v2/models/mnist/infer",
                     R"({"inputs":[{"name":"img","shape":[1],"datatype":"FP32","data":[1]}]})"),
                400, "has no input \\\"img\\\"");
  expect_status(
      post(
          "/v2/models/mnist/infer",
          R"({"inputs":[{"name":"image","shape":[1,1,28,28],"datatype":"INT64","parameters":{"binary_data_size":6272}}]})"),
      400, "runs past");
  expect_status(
      post("/v2/models/mnist/infer",
           R"({"inputs":[{"name":"image","shape":[1,28,28],"datatype":"FP32","data":[0]}]})"),
      400, "data holds 1 elements");
  expect_status(post("/v2/models/mnist/infer",
                     "{\"inputs\":[" + good_input + "], \"outputs\":[{\"name\":\"nope\"}]}"),
                400, "no output \\\"nope\\\"");
  expect_status(post("/v2/models/mnist/infer", "{\"inputs\": [oops"), 400, "not valid JSON");
  expect_status(
      post("/v2/models/echo/infer",
           R"({"inputs":[{"name":"x","shape":[1000,1000],"datatype":"FP32","data":[]}]})"),
      413, "elements a tensor may have");
  // Binary: a JSON header length past the body, and a byte count that disagrees with the shape.
  std::string json =
      R"({"inputs":[{"name":"image","shape":[1,1,28,28],"datatype":"FP32","parameters":{"binary_data_size":100}}]})";
  expect_status(c->send("POST", "/v2/models/mnist/infer", json + std::string(100, '\0'),
                        json.size() + 200, "application/octet-stream"),
                400, "Inference-Header-Content-Length is");
  expect_status(c->send("POST", "/v2/models/mnist/infer", json + std::string(100, '\0'),
                        json.size(), "application/octet-stream"),
                400, "needs 3136");
  // FP32 data where the model wants FP32 but with a wrong dtype name in JSON.
  expect_status(
      post(
          "/v2/models/mnist/infer",
          R"({"inputs":[{"name":"image","shape":[1,1,28,28],"datatype":"FP64","parameters":{"binary_data_size":0}}]})"),
      400, "needs 6272");
  // Bodies over the limit get 413; the connection closes but the reply is complete.
  expect_status(post("/v2/models/echo/infer", std::string((1 << 20) + 10, ' ')), 413,
                "larger than the server's limit");
  // Routes and methods.
  expect_status(c->send("GET", "/v3/health"), 404, "no endpoint");
  expect_status(c->send("GET", "/v2/models/mnist/infer"), 405, "use POST");
  expect_status(c->send("GET", "/v2/models/nope"), 404, "does not exist");
  expect_status(post("/v2/repository/models/nope/load", ""), 404, "not in the repository");
  expect_status(post("/v2/workers/tensorflow/load", "{}"), 404, "backend \\\"tensorflow\\\"");
  expect_status(post("/v2/workers/echo/load", "{\"batch\": [1]}"), 400, "parameter \\\"batch\\\"");
  expect_status(c->send("POST", "/v2/models/echo/infer", "{}", std::nullopt, "application/json"),
                400, "needs an \\\"inputs\\\" array");
  CurlResult bad_header = curl(port(), "/v2/models/echo/infer",
                               "-X POST -H 'Inference-Header-Content-Length: abc' -d '{}'");
  EXPECT_EQ(bad_header.status, 400) << bad_header.body;
  // The client reports the same errors as statuses.
  Result<InferenceResponse> r =
      c->model_infer("mnist", request({{"image", Tensor(DType::kI32, Shape{1, 1, 28, 28}), {}}}));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("expected FP32, got INT32"), std::string_view::npos)
      << r.status().message();
}

TEST_F(HttpTest, RawBinaryRequestsCarryTheOneInputsBytes) {
  client::NativeClient native(server_);
  Tensor img = image(9);
  Result<InferenceResponse> want = native.model_infer("mnist", request({{"image", img, {}}}));
  ASSERT_TRUE(want.ok());
  auto c = client();
  std::string raw(static_cast<const char*>(img.raw_data()), img.nbytes());
  Result<HttpReply> r =
      c->send("POST", "/v2/models/mnist/infer", raw, size_t{0}, "application/octet-stream");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(r->inference_header_length.has_value());
  Result<InferenceResponse> got = decode_infer_response(r->body, r->inference_header_length);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->outputs.at(0).data.equals(want->outputs[0].data));
  expect_status(c->send("POST", "/v2/models/mnist/infer", raw.substr(1), size_t{0}), 400,
                "do not fill input");
}

// A BYTES output that is not valid UTF-8 (the echo model returns its input) cannot be a JSON
// string: by default it comes back with the binary tensor data extension, and a request that
// insists on JSON for it gets 400 naming the output and the parameter to set.
TEST_F(HttpTest, NonUtf8BytesOutputsComeBackBinaryNeverAsInvalidJson) {
  const std::string blob("\x89PNG\xff\xfe");
  const fs::path file = *root_ / "non_utf8.json";
  auto write_body = [&](const std::string& outputs) {
    std::ofstream(file, std::ios::binary) << "{\"inputs\":[{\"name\":\"x\",\"shape\":[2],"
                                             "\"datatype\":\"BYTES\",\"data\":[\"caf\xc3\xa9\",\""
                                          << blob << "\"]}]" << outputs << "}";
  };
  // curl, JSON in: the answer's JSON header is valid UTF-8 JSON and the bytes follow it.
  write_body("");
  CurlResult r =
      curl(port(), "/v2/models/echo/infer",
           "-X POST -D " + (*root_ / "headers.txt").string() + " --data-binary @" + file.string());
  ASSERT_EQ(r.status, 200) << r.body;
  std::ifstream headers_in(*root_ / "headers.txt");
  std::string headers((std::istreambuf_iterator<char>(headers_in)), {});
  const std::string field = "Inference-Header-Content-Length: ";
  const size_t at = headers.find(field);
  ASSERT_NE(at, std::string::npos) << headers;
  const size_t json_size = std::stoul(headers.substr(at + field.size()));
  const std::string header = r.body.substr(0, json_size);
  EXPECT_NE(header.find(R"("binary_data_size":19)"), std::string::npos) << header;
  EXPECT_EQ(header.find('\xff'), std::string::npos) << header;
  Result<InferenceResponse> got = decode_infer_response(r.body, json_size);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->outputs.size(), 1u);
  EXPECT_EQ(got->outputs[0].data.data<std::string>()[0], "caf\xc3\xa9");
  EXPECT_EQ(got->outputs[0].data.data<std::string>()[1], blob);
  // Asking for the output as JSON, per output or for the whole request: 400 and the way out.
  for (const char* outputs : {R"(,"outputs":[{"name":"x","parameters":{"binary_data":false}}])",
                              R"(,"parameters":{"binary_data_output":false})"}) {
    write_body(outputs);
    CurlResult refused =
        curl(port(), "/v2/models/echo/infer", "-X POST --data-binary @" + file.string());
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_NE(refused.body.find(R"(output \"x\": BYTES element 1 is not valid UTF-8)"),
              std::string::npos)
        << refused.body;
    EXPECT_NE(refused.body.find(R"(\"binary_data\": true)"), std::string::npos) << refused.body;
  }
  // The C++ client asking for JSON both ways sends that input binary and reads the answer.
  client::HttpClientOptions o;
  o.binary_inputs = o.binary_outputs = false;
  Tensor x(DType::kString, Shape{2});
  x.data<std::string>()[0] = "caf\xc3\xa9";
  x.data<std::string>()[1] = blob;
  Result<InferenceResponse> echoed = client(o)->model_infer("echo", request({{"x", x, {}}}));
  ASSERT_TRUE(echoed.ok()) << echoed.status().to_string();
  EXPECT_TRUE(echoed->outputs.at(0).data.equals(x));
}

TEST_F(HttpTest, AFullQueueIs429AndATimeoutIs503) {
  auto c1 = client();
  auto c2 = client();
  // The first request waits for its batch (1 s); the second finds the queue full.
  std::future<Result<InferenceResponse>> first =
      c1->model_infer_async("tiny_queue", request({{"x", Tensor::from_vector<int32_t>({1}), {}}}));
  // Waits until the first request is queued (not a fixed sleep: the machine may be busy).
  for (int i = 0; i < 500 && server_->statistics("tiny_queue")->at(0).pending < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Result<HttpReply> full =
      c2->send("POST", "/v2/models/tiny_queue/infer",
               R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[2]}]})");
  expect_status(full, 429, "queue is full");
  ASSERT_TRUE(first.get().ok());
  // A request whose timeout (1 ms) ends before the batch delay (1 s) is rejected.
  Result<HttpReply> late = c2->send(
      "POST", "/v2/models/tiny_queue/infer",
      R"({"parameters":{"timeout":1000},"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[2]}]})");
  expect_status(late, 503, "past its timeout");
}

TEST_F(HttpTest, RepositoryWorkersStatisticsAndMetrics) {
  auto c = client();
  CurlResult index = curl(port(), "/v2/repository/index", "-X POST -d '{}'");
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("{\"name\":\"mnist\",\"version\":\"1\",\"state\":\"READY\"}"),
            std::string::npos)
      << index.body;
  ASSERT_TRUE(c->model_unload("echo_batched").ok());
  EXPECT_FALSE(c->model_ready("echo_batched").value());
  EXPECT_EQ(curl(port(), "/v2/models/echo_batched/ready").status, 503);
  ASSERT_TRUE(c->model_load("echo_batched").ok());
  EXPECT_TRUE(c->model_ready("echo_batched").value());
  CurlResult load = curl(port(), "/v2/repository/models/echo_batched/load", "-X POST");
  EXPECT_EQ(load.status, 200) << load.body;

  Parameters p;
  p.set("model", "mnist/1/model.onnx");  // relative to the repository
  p.set("batch", int64_t{2});
  Result<std::string> endpoint = c->worker_load("migraphx", p);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().to_string();
  EXPECT_EQ(*endpoint, "migraphx");
  CurlResult curl_worker = curl(port(), "/v2/workers/echo/load", "-X POST -d '{}'");
  EXPECT_EQ(curl_worker.status, 200);
  EXPECT_EQ(curl_worker.body, "echo-1");  // "echo" is taken by the repository model
  Result<InferenceResponse> r = c->model_infer(*endpoint, request({{"image", image(1), {}}}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "migraphx");
  ASSERT_TRUE(c->worker_unload(*endpoint).ok());
  EXPECT_EQ(c->model_ready(*endpoint).status().code(), StatusCode::kNotFound);

  CurlResult stats = curl(port(), "/v2/models/mnist/stats");
  EXPECT_EQ(stats.status, 200);
  EXPECT_NE(stats.body.find("\"model_stats\":[{\"name\":\"mnist\",\"version\":\"1\""),
            std::string::npos)
      << stats.body;
  EXPECT_EQ(curl(port(), "/v2/models/stats").status, 200);
  CurlResult metrics = curl(port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("kiln_inference_request_success{model=\"mnist\",version=\"1\"}"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("kiln_inference_request_failure{model=\"mnist\",version=\"1\","
                              "reason=\"invalid\"}"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("kiln_inference_queue_duration_us_bucket{model=\"echo\""),
            std::string::npos);
  EXPECT_NE(metrics.body.find("kiln_inference_batch_size_count{model=\"mnist\""),
            std::string::npos);
}

// Sends raw bytes on a new connection and returns everything the server answers before closing.
std::string raw_exchange(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0)
    out.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST_F(HttpTest, GarbageNeverCrashesTheServer) {
  EXPECT_EQ(raw_exchange(port(), "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(raw_exchange(port(), "GET /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n")
                .rfind("HTTP/1.1 400", 0),
            0u);
  // Random bodies, some starting like a real request, at every endpoint that takes a body.
  auto c = client();
  std::mt19937 rng(1234);
  const std::string prefix =
      R"({"inputs":[{"name":"image","shape":[1,1,28,28],"datatype":"FP32","data":[)";
  for (int i = 0; i < 300; ++i) {
    std::string body = (i % 2) ? prefix : "";
    size_t n = rng() % 200;
    for (size_t k = 0; k < n; ++k) body += static_cast<char>(rng() % 256);
    const char* paths[] = {"/v2/models/mnist/infer", "/v2/models/echo/infer",
                           "/v2/repository/index", "/v2/workers/echo/load"};
    std::optional<size_t> header;
    if (i % 3 == 0) header = rng() % (body.size() + 2);
    Result<HttpReply> r = c->send("POST", paths[i % 4], body, header);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->status == 400 || r->status == 200) << r->status << " " << r->body;
  }
  EXPECT_TRUE(c->server_live().value());
  // Percent-encoded names are decoded.
  EXPECT_EQ(curl(port(), "/v2/models/%6Dnist/ready").status, 200);
}

// 64 client threads, 200 requests each, mixed sizes and models; every response must be the
// answer to its own request.
TEST_F(HttpTest, SixtyFourClientsEachGetTheirOwnAnswers) {
  client::testing::expect_every_client_gets_its_own_answers(
      server_, 64, 200, 300, [this](int t) -> std::shared_ptr<client::Client> {
        client::HttpClientOptions o;
        o.binary_inputs = o.binary_outputs = (t % 2 == 0);
        return client(o);
      });
}

}  // namespace
}  // namespace kiln::server::http
