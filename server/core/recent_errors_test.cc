// SPDX-License-Identifier: Apache-2.0
// RecentErrors: order, wrap-around, bounds and many threads at once; and what the server records
// in it (failed requests and loads) beside the model states the status page shows.
#include "server/core/recent_errors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "server/core/server.h"
#include "server/core/test_repository.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

TEST(RecentErrors, KeepsTheLastOnesOldestFirst) {
  RecentErrors errors(4);
  EXPECT_TRUE(errors.snapshot().empty());
  const uint64_t before = now_ms();
  for (int i = 1; i <= 3; ++i) {
    errors.record(ErrorKind::kRequest, "m" + std::to_string(i), "1",
                  invalid_argument_error("bad " + std::to_string(i)));
  }
  errors.record(ErrorKind::kRequest, "ok", "", Status());  // not an error: ignored
  std::vector<RecentError> got = errors.snapshot();
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].sequence, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(got[i].model, "m" + std::to_string(i + 1));
    EXPECT_EQ(got[i].version, "1");
    EXPECT_EQ(got[i].message, "bad " + std::to_string(i + 1));
    EXPECT_EQ(got[i].code, StatusCode::kInvalidArgument);
    EXPECT_EQ(got[i].kind, ErrorKind::kRequest);
    EXPECT_GE(got[i].time_ms, before);
    EXPECT_LE(got[i].time_ms, now_ms());
  }
  // Seven more: 10 in all, the ring holds 7..10.
  for (int i = 4; i <= 10; ++i) {
    errors.record(i % 2 ? ErrorKind::kLoad : ErrorKind::kRequest, "m" + std::to_string(i), "",
                  unavailable_error("down " + std::to_string(i)));
  }
  got = errors.snapshot();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(errors.total(), 10u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].sequence, static_cast<uint64_t>(7 + i));
    EXPECT_EQ(got[i].message, "down " + std::to_string(7 + i));
    EXPECT_EQ(got[i].kind, (7 + i) % 2 ? ErrorKind::kLoad : ErrorKind::kRequest);
  }
  EXPECT_EQ(error_kind_name(got[0].kind), "load");
  EXPECT_EQ(error_kind_name(got[1].kind), "request");
}

TEST(RecentErrors, CutsLongNamesAndMessagesAtACharacterBoundary) {
  RecentErrors errors(2);
  // 1023 ASCII bytes then a 2-byte character: the cut falls inside it and moves before it.
  std::string message(RecentErrors::kMaxMessageBytes - 1, 'x');
  message += "\xC3\xA9 and more";
  errors.record(ErrorKind::kRequest, std::string(10000, 'n'), "", internal_error(message));
  const RecentError e = errors.snapshot().at(0);
  EXPECT_EQ(e.message, std::string(RecentErrors::kMaxMessageBytes - 1, 'x') + "...");
  EXPECT_EQ(e.model, std::string(RecentErrors::kMaxModelBytes, 'n') + "...");
}

TEST(RecentErrors, ManyThreadsRecordEveryErrorOnce) {
  RecentErrors errors(64);
  constexpr int kThreads = 8, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&errors, t] {
      for (int i = 0; i < kEach; ++i) {
        errors.record(ErrorKind::kRequest, "t" + std::to_string(t), "",
                      internal_error(std::to_string(t) + ":" + std::to_string(i)));
      }
    });
  }
  // Read while they write: every snapshot is consecutive sequences, oldest first.
  for (int k = 0; k < 200; ++k) {
    std::vector<RecentError> got = errors.snapshot();
    for (size_t i = 1; i < got.size(); ++i) {
      ASSERT_EQ(got[i].sequence, got[i - 1].sequence + 1);
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.total(), uint64_t{kThreads * kEach});
  std::vector<RecentError> got = errors.snapshot();
  ASSERT_EQ(got.size(), 64u);
  EXPECT_EQ(got.back().sequence, uint64_t{kThreads * kEach});
  // Each thread's errors keep their order: within a thread, later sequence = later index.
  std::map<std::string, int> last;
  for (const RecentError& e : got) {
    const size_t colon = e.message.find(':');
    ASSERT_NE(colon, std::string::npos);
    EXPECT_EQ("t" + e.message.substr(0, colon), e.model);
    const int index = std::stoi(e.message.substr(colon + 1));
    auto it = last.find(e.model);
    if (it != last.end()) {
      EXPECT_GT(index, it->second) << e.model;
    }
    last[e.model] = index;
  }
}

class ServerErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kiln_recent_errors_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    testing::add_model(root_, "echo",
                       "backend = \"echo\"\n[[inputs]]\nname = \"x\"\ndatatype = \"INT32\"\n"
                       "shape = [2]\n");
    testing::add_model(root_, "broken", "backend = \"echo\"\nmax_batch = 4\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  static InferenceRequest request(std::string model, std::string input) {
    InferenceRequest r;
    r.model = std::move(model);
    Tensor t(DType::kI32, Shape{2});
    t.span<int32_t>()[0] = 1;
    t.span<int32_t>()[1] = 2;
    r.inputs.push_back({std::move(input), std::move(t), {}});
    return r;
  }

  fs::path root_;
};

TEST_F(ServerErrorsTest, FailedLoadsAndRequestsAreRecordedWithTheirModel) {
  ServerOptions so;
  so.repository = root_;
  Result<std::unique_ptr<Server>> created = Server::create(so);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& server = **created;

  std::vector<RecentError> errors = server.recent_errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind, ErrorKind::kLoad);
  EXPECT_EQ(errors[0].model, "broken");
  EXPECT_NE(errors[0].message.find("max_batch"), std::string::npos) << errors[0].message;

  // A good request records nothing; a wrong input name, an unknown model and a request the
  // transport refused do.
  EXPECT_TRUE(server.infer(request("echo", "x")).get().ok());
  EXPECT_EQ(server.error_count(), 1u);
  Result<InferenceResponse> wrong = server.infer(request("echo", "y")).get();
  ASSERT_FALSE(wrong.ok());
  EXPECT_FALSE(server.infer(request("nope", "x")).get().ok());
  server.record_request_error("echo", "1", invalid_argument_error("the body is not JSON"));

  errors = server.recent_errors();
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(server.error_count(), 4u);
  EXPECT_EQ(errors[1].kind, ErrorKind::kRequest);
  EXPECT_EQ(errors[1].model, "echo");
  EXPECT_EQ(errors[1].code, StatusCode::kInvalidArgument);
  EXPECT_EQ(errors[1].message, wrong.status().message());
  EXPECT_EQ(errors[2].model, "nope");
  EXPECT_EQ(errors[2].code, StatusCode::kNotFound);
  EXPECT_EQ(errors[3].version, "1");
  EXPECT_EQ(errors[3].message, "the body is not JSON");

  // Unloaded, echo's requests fail as unavailable, and are recorded as such.
  ASSERT_TRUE(server.unload_model("echo").ok());
  EXPECT_EQ(server.infer(request("echo", "x")).get().status().code(), StatusCode::kUnavailable);
  errors = server.recent_errors();
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[4].code, StatusCode::kUnavailable);
  EXPECT_EQ(errors[4].model, "echo");
}

TEST_F(ServerErrorsTest, ModelStatesSayWhatIsLoadedAndWhyNot) {
  ServerOptions so;
  so.repository = root_;
  Result<std::unique_ptr<Server>> created = Server::create(so);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& server = **created;

  std::vector<ModelState> states = server.model_states();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].name, "broken");
  EXPECT_EQ(states[0].state, "UNAVAILABLE");
  EXPECT_TRUE(states[0].failed);
  EXPECT_NE(states[0].reason.find("max_batch"), std::string::npos) << states[0].reason;
  EXPECT_TRUE(states[0].versions.empty());
  EXPECT_EQ(states[0].backend, "");
  EXPECT_EQ(states[1].name, "echo");
  EXPECT_EQ(states[1].state, "READY");
  EXPECT_FALSE(states[1].failed);
  EXPECT_EQ(states[1].versions, (std::vector<std::string>{"1"}));
  EXPECT_EQ(states[1].backend, "echo");

  ASSERT_TRUE(server.unload_model("echo").ok());
  states = server.model_states();
  EXPECT_EQ(states[1].state, "UNAVAILABLE");
  EXPECT_EQ(states[1].reason, "unloaded");
  EXPECT_FALSE(states[1].failed);
  EXPECT_TRUE(states[1].versions.empty());

  // A reload that fails leaves the old version serving: READY, and failed with the reason.
  ASSERT_TRUE(server.load_model("echo").ok());
  fs::create_directories(root_ / "echo" / "2");
  testing::add_model(root_, "echo", "backend = \"echo\"\ninstances = 0\n");
  EXPECT_FALSE(server.load_model("echo").ok());
  states = server.model_states();
  EXPECT_EQ(states[1].state, "READY");
  EXPECT_TRUE(states[1].failed);
  EXPECT_FALSE(states[1].reason.empty());
  EXPECT_EQ(states[1].versions, (std::vector<std::string>{"1"}));
}

}  // namespace
}  // namespace kiln::server
