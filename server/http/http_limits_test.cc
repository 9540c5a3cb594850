// SPDX-License-Identifier: Apache-2.0
// The HTTP transport against hostile clients (issue 28), over real loopback sockets: oversized
// trailers, declared-but-unsent bodies, the connection limit, slow headers, dual-stack listening
// and bytes in the URL that are not UTF-8. Each test failed before its fix.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "client/client_test_util.h"
#include "client/http_client.h"
#include "server/core/test_repository.h"
#include "server/http/http_server.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;

// A connected loopback socket (IPv4 or IPv6), closed on destruction.
class Socket {
 public:
  explicit Socket(uint16_t port, bool ipv6 = false) {
    fd_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    int rc = -1;
    if (ipv6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_port = htons(port);
      addr.sin6_addr = in6addr_loopback;
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    if (rc != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything that arrives within `timeout` or until the server closes.
  std::string receive(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buffer, static_cast<size_t>(n));
      if (complete(out)) break;
    }
    return out;
  }
  // Whether `out` holds a whole response (a header and its Content-Length of body).
  static bool complete(const std::string& out) {
    const size_t end = out.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    const size_t at = out.find("Content-Length: ");
    if (at == std::string::npos || at > end) return false;
    return out.size() >= end + 4 + std::stoul(out.substr(at + 16));
  }
  // Whether the server closed the connection (seen by the last receive()).
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

const std::string kLive = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";

// The resident set of this process, in bytes.
int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

class HttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kiln_limits_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    testing::add_model(root_, "echo", "backend = \"echo\"\n");
    ServerOptions so;
    so.repository = root_;
    so.model_control = ModelControl::kExplicit;
    auto s = Server::create(so);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    server_->shutdown();
    if (http_) http_->stop(std::chrono::milliseconds(100));
    http_.reset();
    server_.reset();
    fs::remove_all(root_);
  }
  // Starts the HTTP server on a free loopback port with `o` (address and port overridden unless
  // the address is set).
  void start(HttpServerOptions o) {
    if (o.address == HttpServerOptions().address) o.address = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    auto h = HttpServer::start(server_.get(), o);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    http_ = std::move(h).value();
  }
  uint16_t port() const { return http_->port(); }
  // A fresh connection gets 200 from /v2/health/live.
  bool live() {
    Socket s(port());
    return s.connected() && s.send(kLive) &&
           s.receive(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0) == 0;
  }

  fs::path root_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
};

// issue 28 defect 1: a chunked trailer of >= 65,535 bytes made Beast throw length_error out of
// the parser and abort the process. Trailers now have their own limit, answered 431.
TEST_F(HttpLimitsTest, AnOversizedChunkedTrailerIs431NotAnAbort) {
  start({});
  for (size_t size : {size_t{70000}, size_t{9000}}) {
    Socket s(port());
    ASSERT_TRUE(s.connected());
    s.send(
        "POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\n{}\r\n0\r\nX: " +
        std::string(size, 'a') + "\r\n\r\n");
    const std::string answer = s.receive(std::chrono::seconds(5));
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << size << ": " << answer.substr(0, 200);
    EXPECT_NE(answer.find("trailer fields are larger than the server's limit of 8192 bytes"),
              std::string::npos)
        << answer;
  }
  // A small trailer is still fine, and the server is alive.
  Socket ok(port());
  ok.send(
      "POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\n{}\r\n0\r\nX-Trailer: small\r\n\r\n");
  EXPECT_EQ(ok.receive(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_TRUE(live());
  // An oversized header is 431 too.
  Socket big(port());
  big.send("GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX: " + std::string(9000, 'b') + "\r\n\r\n");
  EXPECT_EQ(big.receive(std::chrono::seconds(5)).rfind("HTTP/1.1 431", 0), 0u);
}

// issue 28 defect 2: `{"instances":40000}` started one thread per instance and aborted the
// process; the count is bounded and the load refused with the limit named.
TEST_F(HttpLimitsTest, WorkerInstancesAreBounded) {
  start({});
  auto load = [&](const std::string& body) {
    Socket s(port());
    s.send("POST /v2/workers/echo/load HTTP/1.1\r\nHost: x\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    return s.receive(std::chrono::seconds(20));
  };
  const std::string refused = load(R"({"instances":40000})");
  EXPECT_EQ(refused.rfind("HTTP/1.1 400", 0), 0u) << refused;
  EXPECT_NE(refused.find("40000 instances asked for, but the server allows at most 64"),
            std::string::npos)
      << refused;
  const std::string loaded = load(R"({"instances":64})");
  EXPECT_EQ(loaded.rfind("HTTP/1.1 200", 0), 0u) << loaded;
  EXPECT_TRUE(live());
  EXPECT_TRUE(server_->ready());
}

// issue 28 defect 3: `Content-Length: 268435456` and one byte reserved 256 MiB per connection.
// Memory now follows the bytes that arrive.
TEST_F(HttpLimitsTest, ADeclaredBodyIsNotAllocatedBeforeItArrives) {
  HttpServerOptions o;
  o.max_body_bytes = uint64_t{512} << 20;
  start(o);
  const int64_t before = rss_bytes();
  std::vector<std::unique_ptr<Socket>> sockets;
  for (int i = 0; i < 4; ++i) {
    sockets.push_back(std::make_unique<Socket>(port()));
    ASSERT_TRUE(sockets.back()->connected());
    sockets.back()->send(
        "POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n{");
  }
  // Each connection's first byte has been read once the server answers another request.
  ASSERT_TRUE(live());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t grown = rss_bytes() - before;
  EXPECT_LT(grown, int64_t{64} << 20)
      << "4 connections declaring 256 MiB each grew RSS by " << (grown >> 20) << " MiB";
  sockets.clear();
  EXPECT_TRUE(live());
}

// A body that arrives in pieces, larger than the first read, is still read whole and right.
TEST_F(HttpLimitsTest, ABodyLargerThanOneReadArrivesWhole) {
  start({});
  std::string data;
  for (int i = 0; i < 200000; ++i) data += (i ? ",1" : "1");
  const std::string body =
      R"({"inputs":[{"name":"x","shape":[200000],"datatype":"INT32","data":[)" + data + "]}]}";
  Socket s(port());
  s.send("POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n");
  for (size_t at = 0; at < body.size(); at += 100000) {
    s.send(std::string_view(body).substr(at, 100000));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string answer = s.receive(std::chrono::seconds(10));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer.substr(0, 300);
  EXPECT_NE(answer.find("\"shape\":[200000]"), std::string::npos);
}

// issue 28 defect 5 (the in-process half; tests/e2e has the fd-exhaustion half): at the
// connection limit new connections wait in the backlog and are served once one closes.
TEST_F(HttpLimitsTest, AtTheConnectionLimitNewConnectionsWaitForOneToClose) {
  HttpServerOptions o;
  o.max_connections = 3;
  start(o);
  EXPECT_EQ(http_->max_connections(), 3);
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<Socket>(port()));
    ASSERT_TRUE(idle.back()->send(kLive));
    ASSERT_EQ(idle.back()->receive(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
  }
  Socket waiting(port());
  ASSERT_TRUE(waiting.connected());  // the kernel's backlog takes it
  waiting.send(kLive);
  EXPECT_EQ(waiting.receive(std::chrono::milliseconds(300)), "");
  EXPECT_EQ(http_->connections(), 3);
  idle.pop_back();
  EXPECT_EQ(waiting.receive(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
}

// Slowloris: a header sent a byte at a time is cut off at the idle timeout, whatever trickles in.
TEST_F(HttpLimitsTest, ASlowHeaderIsCutOffAtTheIdleTimeout) {
  HttpServerOptions o;
  o.idle_timeout = std::chrono::seconds(1);
  start(o);
  Socket s(port());
  s.send("GET /v2/health/live HTTP/1.1\r\n");
  const auto began = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    s.send("X");
    s.receive(std::chrono::milliseconds(100));
    closed = s.closed();
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(3));
  EXPECT_TRUE(live());
}

// issue 28 defect 7: with 0.0.0.0 HTTP listened on IPv4 only while gRPC took IPv6 too.
TEST_F(HttpLimitsTest, EveryInterfaceMeansIpv6Too) {
  HttpServerOptions o;
  o.address = "0.0.0.0";
  o.port = 0;
  o.threads = 2;
  auto h = HttpServer::start(server_.get(), o);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  http_ = std::move(h).value();
  for (bool ipv6 : {false, true}) {
    Socket s(port(), ipv6);
    ASSERT_TRUE(s.connected()) << (ipv6 ? "[::1]" : "127.0.0.1");
    s.send(kLive);
    EXPECT_EQ(s.receive(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
  }
}

// issue 28 defect 7: bytes from the URL that are not UTF-8 were echoed raw into the JSON error.
TEST_F(HttpLimitsTest, ErrorBodiesAreValidJsonWhateverTheUrlHolds) {
  start({});
  Socket s(port());
  s.send("GET /v2/models/a%FF%FE%C3/ready HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = s.receive(std::chrono::seconds(5));
  ASSERT_EQ(answer.rfind("HTTP/1.1 404", 0), 0u) << answer;
  const std::string body = answer.substr(answer.find("\r\n\r\n") + 4);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  EXPECT_FALSE(doc.HasParseError()) << body;
  EXPECT_NE(body.find("model \\\"a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\\" does not exist"),
            std::string::npos)
      << body;
}

// --restricted-api: inference needs x-api-key, model management and statistics an admin key;
// health and metadata stay open. Checked with raw requests, curl and the C++ client.
TEST(HttpRestrictedApi, EndpointGroupsNeedTheirHeader) {
  const fs::path root =
      fs::temp_directory_path() / ("kiln_restricted_" + std::to_string(::getpid()));
  fs::remove_all(root);
  testing::add_model(root, "echo", "backend = \"echo\"\n");
  ServerOptions so;
  so.repository = root;
  so.model_control = ModelControl::kExplicit;
  so.access = AccessPolicy::parse({"inference:x-api-key=infer-key",
                                   "model-repository,statistics:x-admin-key=admin-key"})
                  .value();
  auto server = Server::create(so).value();
  HttpServerOptions ho;
  ho.address = "127.0.0.1";
  ho.port = 0;
  ho.threads = 2;
  auto http = HttpServer::start(server.get(), ho).value();
  const std::string url = "http://127.0.0.1:" + std::to_string(http->port());
  auto curl = [&](const std::string& args) {
    std::string cmd = "curl -s -o /dev/null -w '%{http_code}' " + args + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    char buffer[64] = {};
    std::string out(buffer, std::fread(buffer, 1, sizeof(buffer) - 1, pipe));
    ::pclose(pipe);
    return out;
  };
  const std::string infer =
      "-X POST " + url + "/v2/models/echo/infer -d " +
      R"('{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[7]}]}')";
  EXPECT_EQ(curl(infer), "401");
  EXPECT_EQ(curl("-H 'x-api-key: wrong' " + infer), "401");
  EXPECT_EQ(curl("-H 'X-Api-Key: infer-key' " + infer), "200");
  EXPECT_EQ(curl(url + "/v2/health/ready"), "200");
  EXPECT_EQ(curl(url + "/v2/models/echo"), "200");
  EXPECT_EQ(curl(url + "/metrics"), "401");
  EXPECT_EQ(curl("-H 'x-admin-key: admin-key' " + url + "/metrics"), "200");
  EXPECT_EQ(curl("-H 'x-api-key: infer-key' -X POST " + url + "/v2/repository/models/echo/unload"),
            "401");

  client::HttpClientOptions plain;
  auto anonymous = client::HttpClient::create(url, plain).value();
  Result<InferenceResponse> refused = anonymous->model_infer(
      "echo", client::testing::request({{"x", Tensor::from_vector<int32_t>({1}), {}}}));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("inference endpoints need the header \"x-api-key\""),
            std::string::npos);
  client::HttpClientOptions keyed;
  keyed.headers = {{"x-api-key", "infer-key"}, {"x-admin-key", "admin-key"}};
  auto c = client::HttpClient::create(url, keyed).value();
  Result<InferenceResponse> r = c->model_infer(
      "echo", client::testing::request({{"x", Tensor::from_vector<int32_t>({7}), {}}}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].data.data<int32_t>()[0], 7);
  EXPECT_TRUE(c->model_unload("echo").ok());
  server->shutdown();
  http->stop(std::chrono::milliseconds(100));
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server::http
