// SPDX-License-Identifier: Apache-2.0
// Fault injection (issue 28): a backend that throws or fails while loading and while running,
// served over real loopback sockets by both transports. The failing requests get an internal
// error naming the model; every other request, on that model and on others, is answered; the
// server stays up. Before the fix an exception from a backend ended the process.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "client/client_test_util.h"
#include "client/grpc_client.h"
#include "client/http_client.h"
#include "server/core/test_repository.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using client::testing::request;

// The first INT32 element of a request to the faulty backend says what it does.
constexpr int32_t kThrow = -1;       // throws std::runtime_error
constexpr int32_t kThrowOther = -2;  // throws an int
constexpr int32_t kFail = -3;        // returns an error (the ordinary way to fail)

// Echoes, except as the first element (or the config's `fault = "load"`) asks.
class FaultyBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& context) override {
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> fault,
                          context.config.parameters.get_string("fault"));
    if (fault == "load") throw std::runtime_error("injected load fault");
    BackendInfo info;
    info.platform = "faulty";
    return info;
  }

  std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) override {
    std::vector<Result<std::vector<InferTensor>>> out;
    for (const InferenceRequest* r : batch) {
      const int32_t first = r->inputs[0].data.span<int32_t>()[0];
      if (first == kThrow) throw std::runtime_error("injected run fault");
      if (first == kThrowOther) throw 28;
      if (first == kFail) {
        out.emplace_back(invalid_argument_error("injected failure"));
        continue;
      }
      out.emplace_back(std::vector<InferTensor>{{r->inputs[0].name, r->inputs[0].data, {}}});
    }
    return out;
  }
};

class BackendFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kiln_faults_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    testing::add_model(root_, "echo", "backend = \"echo\"\ninstances = 2\n");
    testing::add_model(root_, "faulty", "backend = \"faulty\"\ninstances = 2\n");
    testing::add_model(root_, "faulty_load",
                       "backend = \"faulty\"\n[parameters]\nfault = \"load\"\n");
    ServerOptions so;
    so.repository = root_;
    so.model_control = ModelControl::kExplicit;
    so.backends["faulty"] = [] { return std::make_unique<FaultyBackend>(); };
    auto s = Server::create(so);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
    http::HttpServerOptions ho;
    ho.address = "127.0.0.1";
    ho.port = 0;
    ho.threads = 2;
    auto h = http::HttpServer::start(server_.get(), ho);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    http_ = std::move(h).value();
    grpc::GrpcServerOptions go;
    go.address = "127.0.0.1";
    go.port = 0;
    auto g = grpc::GrpcServer::start(server_.get(), go);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    grpc_ = std::move(g).value();
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    grpc_.reset();
    http_.reset();
    server_.reset();
    fs::remove_all(root_);
  }

  std::shared_ptr<client::Client> client(bool over_grpc) {
    if (over_grpc) {
      auto c = client::GrpcClient::create("127.0.0.1:" + std::to_string(grpc_->port()));
      EXPECT_TRUE(c.ok()) << c.status().to_string();
      return c.ok() ? std::shared_ptr<client::Client>(std::move(c).value()) : nullptr;
    }
    auto c = client::HttpClient::create("http://127.0.0.1:" + std::to_string(http_->port()));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::shared_ptr<client::Client>(std::move(c).value()) : nullptr;
  }

  fs::path root_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<http::HttpServer> http_;
  std::unique_ptr<grpc::GrpcServer> grpc_;
};

TEST_F(BackendFaults, ALoadThatThrowsLeavesTheModelUnavailableAndTheServerUp) {
  bool reported = false;
  for (const RepositoryEntry& e : server_->repository_index()) {
    if (e.name != "faulty_load") continue;
    reported = true;
    EXPECT_EQ(e.state, "UNAVAILABLE");
    EXPECT_NE(e.reason.find("model \"faulty_load\""), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("the faulty backend threw while loading: injected load fault"),
              std::string::npos)
        << e.reason;
  }
  EXPECT_TRUE(reported);
  for (bool over_grpc : {false, true}) {
    std::shared_ptr<client::Client> c = client(over_grpc);
    ASSERT_NE(c, nullptr);
    Status load = c->model_load("faulty_load");
    EXPECT_EQ(load.code(), StatusCode::kInternal) << load.to_string();
    EXPECT_NE(load.message().find("model \"faulty_load\""), std::string::npos) << load.to_string();
    EXPECT_NE(load.message().find("injected load fault"), std::string::npos) << load.to_string();
    // A worker of that backend loads (no fault asked for) and serves.
    Result<std::string> worker = c->worker_load("faulty");
    ASSERT_TRUE(worker.ok()) << worker.status().to_string();
    Tensor x = Tensor::from_vector<int32_t>({7, 8});
    auto r = c->model_infer(*worker, request({{"x", x, {}}}));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->outputs[0].data.equals(x));
    EXPECT_TRUE(c->worker_unload(*worker).ok());
    EXPECT_TRUE(c->server_live().value_or(false));
  }
}

// 4 HTTP and 4 gRPC clients at once: every 4th request throws, every 4th throws a non-exception,
// every 8th fails the ordinary way; the rest, to the faulty model and to echo, must all come back
// with their own data.
TEST_F(BackendFaults, ARunThatThrowsFailsOnlyItsOwnRequests) {
  constexpr int kClients = 8, kRequests = 64;
  std::atomic<int> thrown{0}, failed{0}, answered{0}, wrong{0};
  std::mutex mutex;
  std::string first_wrong;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<client::Client> c = client(t % 2 == 1);
      if (c == nullptr) return;
      for (int i = 0; i < kRequests; ++i) {
        const int kind = i % 8;
        const int32_t first = kind == 0 || kind == 4 ? kThrow
                              : kind == 2            ? kThrowOther
                              : kind == 6            ? kFail
                                                     : t * 1000 + i;
        Tensor x = Tensor::from_vector<int32_t>({first, t, i});
        const std::string model = kind == 7 ? "echo" : "faulty";
        const std::string id = std::to_string(t) + "/" + std::to_string(i);
        auto r = c->model_infer(model, request({{"x", x, {}}}, id));
        bool ok = false;
        if (first == kThrow || first == kThrowOther) {
          ok = !r.ok() && r.status().code() == StatusCode::kInternal &&
               r.status().message().find("model \"faulty\"") != std::string::npos &&
               r.status().message().find(first == kThrow
                                             ? "threw while running a batch of 1 "
                                               "request(s): injected run fault"
                                             : "not a std::exception") != std::string::npos;
          thrown += ok;
        } else if (first == kFail) {
          ok = !r.ok() && r.status().code() == StatusCode::kInvalidArgument &&
               r.status().message().find("injected failure") != std::string::npos;
          failed += ok;
        } else {
          ok = r.ok() && r->id == id && r->outputs.size() == 1 && r->outputs[0].data.equals(x);
          answered += ok;
        }
        if (!ok) {
          ++wrong;
          std::lock_guard<std::mutex> lock(mutex);
          if (first_wrong.empty()) {
            first_wrong =
                id + " to " + model + ": " + (r.ok() ? "an answer" : r.status().to_string());
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  EXPECT_EQ(thrown.load(), kClients * kRequests * 3 / 8);
  EXPECT_EQ(failed.load(), kClients * kRequests / 8);
  EXPECT_EQ(answered.load(), kClients * kRequests / 2);
  // The instance threads survived: the model still answers, and counted its failures.
  Tensor five = Tensor::from_vector<int32_t>({5});
  auto after = client(false)->model_infer("faulty", request({{"x", five, {}}}));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  auto stats = server_->statistics("faulty");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].fail.count, static_cast<uint64_t>(kClients * kRequests / 2));
  EXPECT_FALSE(server_->ready());  // faulty_load did not load
  EXPECT_TRUE(server_->live());
}

}  // namespace
}  // namespace kiln::server
