// SPDX-License-Identifier: Apache-2.0
// Tests for log levels, the installable sink and the default stderr sink.
#include "core/logging.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln {
namespace {
// Counts how often it is formatted.
struct FormatProbe {
  int* count;
};
}  // namespace
}  // namespace kiln

template <>
struct fmt::formatter<kiln::FormatProbe> : fmt::formatter<int> {
  auto format(kiln::FormatProbe p, fmt::format_context& ctx) const {
    return fmt::formatter<int>::format(++*p.count, ctx);
  }
};

namespace kiln {
namespace {

// Restores the process-wide level and the default sink after each test.
class Logging : public ::testing::Test {
 protected:
  void SetUp() override { saved_level_ = log_level(); }
  void TearDown() override {
    set_log_sink(nullptr);
    set_log_level(saved_level_);
  }

  // Installs a sink that records every message it receives.
  void capture() {
    set_log_sink([this](LogLevel level, std::string_view message) {
      std::lock_guard lock(mutex_);
      messages_.emplace_back(level, std::string(message));
    });
  }
  std::vector<std::pair<LogLevel, std::string>> messages() {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  LogLevel saved_level_ = LogLevel::kWarning;
  std::mutex mutex_;
  std::vector<std::pair<LogLevel, std::string>> messages_;
};

using Messages = std::vector<std::pair<LogLevel, std::string>>;

TEST_F(Logging, LevelNamesRoundTrip) {
  for (LogLevel l : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                     LogLevel::kError, LogLevel::kOff}) {
    EXPECT_EQ(parse_log_level(log_level_name(l), LogLevel::kError), l) << log_level_name(l);
  }
  EXPECT_EQ(log_level_name(LogLevel::kWarning), "warning");
  EXPECT_EQ(parse_log_level("warn", LogLevel::kOff), LogLevel::kWarning);
  EXPECT_EQ(parse_log_level("WARNING", LogLevel::kOff), LogLevel::kOff);
  EXPECT_EQ(parse_log_level("", LogLevel::kInfo), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("verbose", LogLevel::kDebug), LogLevel::kDebug);
}

TEST_F(Logging, SinkReceivesMessagesAtOrAboveTheLevel) {
  capture();
  set_log_level(LogLevel::kInfo);
  EXPECT_EQ(log_level(), LogLevel::kInfo);
  log(LogLevel::kTrace, "trace {}", 1);
  log(LogLevel::kDebug, "debug {}", 2);
  log(LogLevel::kInfo, "info {}", 3);
  log(LogLevel::kWarning, "model \"{}\" has {} nodes", "resnet", 50);
  log(LogLevel::kError, "error {:.2f}", 0.5);
  log_message(LogLevel::kDebug, "direct debug");
  log_message(LogLevel::kError, "direct error");
  EXPECT_EQ(messages(), (Messages{{LogLevel::kInfo, "info 3"},
                                  {LogLevel::kWarning, "model \"resnet\" has 50 nodes"},
                                  {LogLevel::kError, "error 0.50"},
                                  {LogLevel::kError, "direct error"}}));
  EXPECT_TRUE(log_enabled(LogLevel::kInfo));
  EXPECT_FALSE(log_enabled(LogLevel::kDebug));
}

TEST_F(Logging, LevelChangesTakeEffectImmediately) {
  capture();
  set_log_level(LogLevel::kError);
  log(LogLevel::kWarning, "dropped");
  set_log_level(LogLevel::kTrace);
  log(LogLevel::kTrace, "kept");
  set_log_level(LogLevel::kOff);
  log(LogLevel::kError, "dropped too");
  EXPECT_FALSE(log_enabled(LogLevel::kError));
  EXPECT_EQ(messages(), (Messages{{LogLevel::kTrace, "kept"}}));
}

TEST_F(Logging, MessagesBelowTheLevelAreNotFormatted) {
  capture();
  set_log_level(LogLevel::kWarning);
  int formatted = 0;
  log(LogLevel::kDebug, "probe {}", FormatProbe{&formatted});
  EXPECT_EQ(formatted, 0);
  log(LogLevel::kWarning, "probe {}", FormatProbe{&formatted});
  EXPECT_EQ(formatted, 1);
  EXPECT_EQ(messages(), (Messages{{LogLevel::kWarning, "probe 1"}}));
}

TEST_F(Logging, RestoringTheDefaultSinkWritesToStderr) {
  capture();
  set_log_level(LogLevel::kInfo);
  log(LogLevel::kInfo, "to the sink");
  set_log_sink(nullptr);
  ::testing::internal::CaptureStderr();
  log(LogLevel::kWarning, "to stderr {}", 42);
  log(LogLevel::kDebug, "not at all");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "kiln warning: to stderr 42\n");
  EXPECT_EQ(messages(), (Messages{{LogLevel::kInfo, "to the sink"}}));

  // An empty std::function restores the default as well.
  capture();
  set_log_sink(LogSink());
  ::testing::internal::CaptureStderr();
  log(LogLevel::kError, "again");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "kiln error: again\n");
  EXPECT_EQ(messages().size(), 1u);
}

TEST_F(Logging, ReplacingTheSinkRoutesToTheNewOne) {
  set_log_level(LogLevel::kInfo);
  std::vector<std::string> first, second;
  set_log_sink([&](LogLevel, std::string_view m) { first.emplace_back(m); });
  log(LogLevel::kInfo, "one");
  set_log_sink([&](LogLevel, std::string_view m) { second.emplace_back(m); });
  log(LogLevel::kInfo, "two");
  set_log_sink(nullptr);
  EXPECT_EQ(first, std::vector<std::string>{"one"});
  EXPECT_EQ(second, std::vector<std::string>{"two"});
}

TEST_F(Logging, ConcurrentLoggingAndSinkSwaps) {
  set_log_level(LogLevel::kInfo);
  std::atomic<int> a{0}, b{0};
  set_log_sink([&](LogLevel, std::string_view) { a.fetch_add(1); });
  constexpr int kThreads = 4;
  constexpr int kEach = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kEach; ++i) log(LogLevel::kInfo, "message {}", i);
    });
  }
  for (int i = 0; i < 200; ++i) {
    if (i % 2 == 0) {
      set_log_sink([&](LogLevel, std::string_view) { b.fetch_add(1); });
    } else {
      set_log_sink([&](LogLevel, std::string_view) { a.fetch_add(1); });
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a.load() + b.load(), kThreads * kEach);
}

}  // namespace
}  // namespace kiln
