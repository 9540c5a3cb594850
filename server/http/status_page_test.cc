// SPDX-License-Identifier: Apache-2.0
// The status page and its JSON over real sockets with curl: headers (type, CSP, caching), the
// built-in page byte for byte, model states and recent errors in the JSON, the --restricted-api
// group, and the page's own port. (tests/ui runs the page itself in headless Chromium.)
#include "server/http/status_page.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "server/core/test_repository.h"
#include "server/http/http_server.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;

struct Reply {
  int status = -1;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// curl -i against 127.0.0.1:port; `args` go before the URL.
Reply fetch(uint16_t port, const std::string& path, const std::string& args = "") {
  const std::string cmd = "curl -s -S -i --max-time 20 " + args +
                          " 'http://127.0.0.1:" + std::to_string(port) + path + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  Reply r;
  if (pipe == nullptr) return r;
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  const size_t end = out.find("\r\n\r\n");
  if (out.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) {
    r.body = out;
    return r;
  }
  r.status = std::atoi(out.c_str() + 9);
  r.body = out.substr(end + 4);
  std::istringstream lines(out.substr(0, end));
  std::string line;
  std::getline(lines, line);  // the status line
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return r;
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kiln_status_page_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    testing::add_model(root_, "echo",
                       "backend = \"echo\"\n[[inputs]]\nname = \"x\"\ndatatype = \"INT32\"\n"
                       "shape = [2]\n");
    testing::add_model(root_, "broken", "backend = \"echo\"\nmax_batch = 4\n");
  }
  void TearDown() override {
    if (http_) http_->stop(std::chrono::milliseconds(100));
    if (server_) server_->shutdown();
    fs::remove_all(root_);
  }
  void start(std::vector<std::string> restricted = {}, int ui_port = -1) {
    ServerOptions so;
    so.repository = root_;
    so.model_control = ModelControl::kExplicit;
    so.access = AccessPolicy::parse(restricted).value();
    server_ = Server::create(so).value();
    HttpServerOptions ho;
    ho.address = "127.0.0.1";
    ho.port = 0;
    ho.threads = 2;
    ho.ui_port = ui_port;
    Result<std::unique_ptr<HttpServer>> http = HttpServer::start(server_.get(), ho);
    ASSERT_TRUE(http.ok()) << http.status().to_string();
    http_ = std::move(http).value();
  }

  fs::path root_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(StatusPageTest, ThePageIsTheSourceFileWithAHashOnlyPolicy) {
  start();
  Reply page = fetch(http_->port(), "/");
  ASSERT_EQ(page.status, 200) << page.body;
  std::ifstream source(std::string(KILN_SOURCE_DIR) + "/server/http/status_page.html",
                       std::ios::binary);
  const std::string html((std::istreambuf_iterator<char>(source)),
                         std::istreambuf_iterator<char>());
  ASSERT_FALSE(html.empty());
  EXPECT_EQ(page.body, html);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(page.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(page.headers["cache-control"], "no-cache");
  const std::string csp = page.headers["content-security-policy"];
  EXPECT_EQ(csp, status_page_csp());
  EXPECT_EQ(csp.rfind("default-src 'none'; script-src 'sha256-", 0), 0u) << csp;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  // One hash per inline element of the page: its one <script> and one <style>.
  EXPECT_EQ(count(csp, "'sha256-"), count(html, "<script>") + count(html, "<style>"));
  EXPECT_EQ(count(html, "<script>"), 1u);
  // Nothing outside the page: no URL to another origin, no script or style from elsewhere.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);

  EXPECT_EQ(fetch(http_->port(), "/?x=1").status, 200);
  EXPECT_EQ(fetch(http_->port(), "/", "-X POST -d x").status, 405);
}

TEST_F(StatusPageTest, TheJsonSaysStatesStatisticsAndRecentErrors) {
  start();
  const uint16_t port = http_->port();
  ASSERT_EQ(
      fetch(port, "/v2/models/echo/infer",
            R"(-X POST -d '{"inputs":[{"name":"x","shape":[2],"datatype":"INT32","data":[1,2]}]}')")
          .status,
      200);
  // Two failed requests: a body that is not JSON (refused by the transport) and a wrong input.
  ASSERT_EQ(fetch(port, "/v2/models/echo/infer", "-X POST -d '{oops'").status, 400);
  ASSERT_EQ(
      fetch(port, "/v2/models/echo/infer",
            R"(-X POST -d '{"inputs":[{"name":"y","shape":[2],"datatype":"INT32","data":[1,2]}]}')")
          .status,
      400);
  ASSERT_EQ(fetch(port, "/v2/repository/models/echo/unload", "-X POST").status, 200);

  Reply r = fetch(port, "/v2/kiln/status");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(r.headers["cache-control"], "no-store");
  rapidjson::Document doc;
  doc.Parse(r.body.c_str());
  ASSERT_FALSE(doc.HasParseError()) << r.body;
  EXPECT_STREQ(doc["server"]["name"].GetString(), "kiln");
  EXPECT_FALSE(doc["server"]["ready"].GetBool());  // broken failed to load
  EXPECT_GT(doc["time_ms"].GetUint64(), uint64_t{1700000000000});

  const auto& models = doc["models"];
  ASSERT_EQ(models.Size(), 2u);
  EXPECT_STREQ(models[0]["name"].GetString(), "broken");
  EXPECT_STREQ(models[0]["state"].GetString(), "UNAVAILABLE");
  EXPECT_TRUE(models[0]["failed"].GetBool());
  EXPECT_NE(std::string(models[0]["reason"].GetString()).find("max_batch"), std::string::npos);
  EXPECT_STREQ(models[1]["name"].GetString(), "echo");
  EXPECT_STREQ(models[1]["state"].GetString(), "UNAVAILABLE");
  EXPECT_STREQ(models[1]["reason"].GetString(), "unloaded");
  EXPECT_FALSE(models[1]["failed"].GetBool());
  EXPECT_EQ(models[1]["versions"].Size(), 0u);
  EXPECT_EQ(doc["statistics"]["model_stats"].Size(), 0u);  // nothing is loaded

  const auto& errors = doc["recent_errors"];
  ASSERT_EQ(errors.Size(), 3u);
  EXPECT_EQ(doc["errors_total"].GetUint64(), 3u);
  EXPECT_STREQ(errors[0]["kind"].GetString(), "load");
  EXPECT_STREQ(errors[0]["model"].GetString(), "broken");
  for (int i : {1, 2}) {
    EXPECT_EQ(errors[i]["sequence"].GetUint64(), static_cast<uint64_t>(i + 1));
    EXPECT_STREQ(errors[i]["kind"].GetString(), "request");
    EXPECT_STREQ(errors[i]["model"].GetString(), "echo");
    EXPECT_STREQ(errors[i]["code"].GetString(), "INVALID_ARGUMENT");
    EXPECT_EQ(errors[i]["http_status"].GetInt(), 400);
  }
  EXPECT_NE(std::string(errors[1]["message"].GetString()).find("not valid JSON"), std::string::npos)
      << errors[1]["message"].GetString();
  EXPECT_NE(std::string(errors[2]["message"].GetString()).find("\"y\""), std::string::npos)
      << errors[2]["message"].GetString();

  // Loaded again: READY with its backend and a version's statistics.
  ASSERT_EQ(fetch(port, "/v2/repository/models/echo/load", "-X POST").status, 200);
  doc.Parse(fetch(port, "/v2/kiln/status").body.c_str());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["models"][1]["state"].GetString(), "READY");
  EXPECT_STREQ(doc["models"][1]["backend"].GetString(), "echo");
  EXPECT_STREQ(doc["models"][1]["versions"][0].GetString(), "1");
  ASSERT_EQ(doc["statistics"]["model_stats"].Size(), 1u);
  EXPECT_STREQ(doc["statistics"]["model_stats"][0]["name"].GetString(), "echo");
}

TEST_F(StatusPageTest, TheStatisticsGroupGuardsThePageAndItsJson) {
  start({"statistics:x-admin-key=admin-key"});
  const uint16_t port = http_->port();
  Reply refused = fetch(port, "/");
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(refused.body.find("x-admin-key"), std::string::npos) << refused.body;
  EXPECT_EQ(fetch(port, "/v2/kiln/status").status, 401);
  EXPECT_EQ(fetch(port, "/", "-H 'x-admin-key: admin-key'").status, 200);
  EXPECT_EQ(fetch(port, "/v2/kiln/status", "-H 'X-Admin-Key: admin-key'").status, 200);
  EXPECT_EQ(fetch(port, "/v2/health/live").status, 200);
}

TEST_F(StatusPageTest, ItsOwnPortServesThePageOnly) {
  start({}, 0);
  const uint16_t ui = http_->ui_port();
  ASSERT_NE(ui, 0);
  EXPECT_NE(ui, http_->port());
  Reply page = fetch(ui, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-security-policy"], status_page_csp());
  EXPECT_EQ(fetch(ui, "/v2/kiln/status").status, 200);
  Reply other = fetch(ui, "/v2/health/live");
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.find("--ui-port"), std::string::npos) << other.body;
  EXPECT_EQ(fetch(ui, "/v2/models/echo/infer", "-X POST -d '{}'").status, 404);
  EXPECT_EQ(fetch(http_->port(), "/").status, 200);  // the HTTP port serves it too

  // A taken port is refused, naming the flag.
  HttpServerOptions ho;
  ho.address = "127.0.0.1";
  ho.port = 0;
  ho.ui_port = ui;
  Result<std::unique_ptr<HttpServer>> clash = HttpServer::start(server_.get(), ho);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("--ui-port"), std::string::npos)
      << clash.status().to_string();
  // Gone with the HTTP server (stop() leaves the listening sockets to the destructor).
  http_.reset();
  EXPECT_EQ(fetch(ui, "/").status, -1);
}

TEST_F(StatusPageTest, NoPortOfItsOwnUnlessAskedFor) {
  start();
  EXPECT_EQ(http_->ui_port(), 0);
}

}  // namespace
}  // namespace kiln::server::http
