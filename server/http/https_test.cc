// SPDX-License-Identifier: Apache-2.0
// HTTPS and mutual TLS over real loopback sockets, driven by curl and the C++ HttpClient with
// certificates made by the openssl command.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "client/client_test_util.h"
#include "client/http_client.h"
#include "server/core/test_certificates.h"
#include "server/core/test_repository.h"
#include "server/http/http_server.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;

// curl's HTTP status for `args` ("000" when no HTTP exchange happened, e.g. a failed handshake).
std::string curl_status(const std::string& args) {
  const std::string cmd = "curl -s -o /dev/null -m 10 -w '%{http_code}' " + args + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  char buffer[16] = {};
  std::string out(buffer, std::fread(buffer, 1, sizeof(buffer) - 1, pipe));
  ::pclose(pipe);
  return out;
}

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kiln_https_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ASSERT_TRUE(testing::make_test_certificates(root_ / "certs", &certs_)) << "openssl failed";
    testing::add_model(root_ / "repo", "echo", "backend = \"echo\"\n");
    ServerOptions so;
    so.repository = root_ / "repo";
    server_ = Server::create(so).value();
  }
  void TearDown() override {
    if (http_) http_->stop(std::chrono::milliseconds(100));
    server_->shutdown();
    fs::remove_all(root_);
  }
  void start(bool mutual) {
    HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    o.tls = {certs_.server_cert.string(), certs_.server_key.string(),
             mutual ? certs_.ca.string() : ""};
    auto h = HttpServer::start(server_.get(), o);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    http_ = std::move(h).value();
  }
  std::string url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(http_->port()) + path;
  }

  fs::path root_;
  testing::TestCertificates certs_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(HttpsTest, ServesHttpsToClientsThatTrustItsCa) {
  start(false);
  EXPECT_EQ(curl_status("--cacert " + certs_.ca.string() + " " + url("/v2/health/ready")), "200");
  EXPECT_EQ(
      curl_status("--cacert " + certs_.ca.string() + " -X POST " + url("/v2/models/echo/infer") +
                  R"( -d '{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[3]}]}')"),
      "200");
  // A client that does not trust the CA refuses; plain HTTP to the TLS port gets nothing.
  EXPECT_EQ(curl_status(url("/v2/health/ready")), "000");
  EXPECT_EQ(curl_status("http://127.0.0.1:" + std::to_string(http_->port()) + "/v2/health/ready"),
            "000");
  // The server is still serving after the failed handshakes.
  EXPECT_EQ(curl_status("--cacert " + certs_.ca.string() + " " + url("/v2/health/live")), "200");

  // The C++ client: trusting the CA it serves; with the system's CAs only it refuses.
  client::HttpClientOptions o;
  o.tls_ca_file = certs_.ca.string();
  auto c = client::HttpClient::create(url(""), o).value();
  EXPECT_TRUE(c->server_ready().value_or(false));
  Result<InferenceResponse> r = c->model_infer(
      "echo", client::testing::request({{"x", Tensor::from_vector<int32_t>({4, 2}), {}}}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].data.data<int32_t>()[1], 2);
  Result<bool> untrusted = client::HttpClient::create(url(""))->get()->server_ready();
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.status().message().find("TLS handshake"), std::string::npos)
      << untrusted.status().message();
}

TEST_F(HttpsTest, MutualTlsNeedsAClientCertificate) {
  start(true);
  const std::string ca = "--cacert " + certs_.ca.string() + " ";
  EXPECT_EQ(curl_status(ca + url("/v2/health/ready")), "000");
  EXPECT_EQ(curl_status(ca + "--cert " + certs_.client_cert.string() + " --key " +
                        certs_.client_key.string() + " " + url("/v2/health/ready")),
            "200");
  // A certificate the CA did not sign (the server's own key pair is signed by it, so make one).
  const fs::path other = root_ / "other";
  testing::TestCertificates foreign;
  ASSERT_TRUE(testing::make_test_certificates(other, &foreign));
  EXPECT_EQ(curl_status(ca + "--cert " + foreign.client_cert.string() + " --key " +
                        foreign.client_key.string() + " " + url("/v2/health/ready")),
            "000");

  // The C++ client with and without its certificate.
  client::HttpClientOptions o;
  o.tls_ca_file = certs_.ca.string();
  EXPECT_FALSE(client::HttpClient::create(url(""), o).value()->server_ready().ok());
  o.tls_cert_file = certs_.client_cert.string();
  o.tls_key_file = certs_.client_key.string();
  EXPECT_TRUE(client::HttpClient::create(url(""), o).value()->server_ready().value_or(false));
}

TEST_F(HttpsTest, MissingOrBadFilesAreClearErrors) {
  HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.tls = {(root_ / "nope.pem").string(), certs_.server_key.string(), ""};
  Result<std::unique_ptr<HttpServer>> missing = HttpServer::start(server_.get(), o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-cert"), std::string::npos)
      << missing.status().message();
  o.tls = {certs_.server_cert.string(), certs_.ca.string(), ""};  // a certificate, not a key
  Result<std::unique_ptr<HttpServer>> bad = HttpServer::start(server_.get(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tls-key"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace kiln::server::http
