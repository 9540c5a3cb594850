// SPDX-License-Identifier: Apache-2.0
// The dynamic batcher with real threads: batch formation, delays, preferred sizes, priorities,
// timeouts, a full queue and draining on stop.
#include "server/core/scheduler.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>

namespace kiln::server {
namespace {

using namespace std::chrono_literals;

// Records every batch; a request with id "block" holds its instance until release() is called.
class Recorder {
 public:
  Scheduler::RunBatch run() {
    return [this](std::vector<PendingRequest>& batch) {
      std::vector<std::string> ids;
      for (PendingRequest& p : batch) ids.push_back(p.request.id);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        batches_.push_back(ids);
        times_.push_back(Clock::now());
      }
      for (PendingRequest& p : batch) {
        if (p.request.id == "block") gate_.wait();
        p.done(InferenceResponse{});
      }
    };
  }
  Scheduler::Expire expire() {
    return [this](PendingRequest& p) {
      std::lock_guard<std::mutex> lock(mutex_);
      expired_.push_back(p.request.id);
      p.done(deadline_exceeded_error("expired"));
    };
  }
  void release() { release_.set_value(); }
  std::vector<std::vector<std::string>> batches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }
  std::vector<Clock::time_point> times() {
    std::lock_guard<std::mutex> lock(mutex_);
    return times_;
  }
  std::vector<std::string> expired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return expired_;
  }
  // Waits until `n` batches ran (or 5 s passed).
  bool wait_batches(size_t n) {
    for (int i = 0; i < 5000; ++i) {
      if (batches().size() >= n) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<std::string>> batches_;
  std::vector<Clock::time_point> times_;
  std::vector<std::string> expired_;
  std::promise<void> release_;
  std::shared_future<void> gate_ = release_.get_future().share();
};

PendingRequest make(std::string id, int64_t batch_size = 1, uint32_t priority = 0) {
  PendingRequest p;
  p.request.id = std::move(id);
  p.batch_size = batch_size;
  p.priority = priority;
  p.arrived = Clock::now();
  p.done = [](Result<InferenceResponse>) {};
  return p;
}

size_t total(const std::vector<std::vector<std::string>>& batches) {
  size_t n = 0;
  for (const auto& b : batches) n += b.size();
  return n;
}

TEST(Scheduler, BatchesFormUpToMaxBatchSize) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 4;
  c.max_queue_delay_microseconds = 1000000;  // long, so a busy machine cannot split the batches
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(s.enqueue(make(std::to_string(i))).ok());
  ASSERT_TRUE(rec.wait_batches(3));
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(batches[1], (std::vector<std::string>{"4", "5", "6", "7"}));
  EXPECT_EQ(batches[2], (std::vector<std::string>{"8", "9"}));
}

TEST(Scheduler, BatchSizesCountDimZeroEntries) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 8;
  c.max_queue_delay_microseconds = 1000000;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  ASSERT_TRUE(s.enqueue(make("a", 5)).ok());
  ASSERT_TRUE(s.enqueue(make("b", 3)).ok());  // 5 + 3 fills the batch at once
  ASSERT_TRUE(s.enqueue(make("c", 4)).ok());
  ASSERT_TRUE(rec.wait_batches(2));
  auto batches = rec.batches();
  EXPECT_EQ(batches[0], (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(batches[1], (std::vector<std::string>{"c"}));
}

TEST(Scheduler, WaitsForTheQueueDelayThenSendsAPartialBatch) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 8;
  c.max_queue_delay_microseconds = 30000;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  Clock::time_point start = Clock::now();
  ASSERT_TRUE(s.enqueue(make("a")).ok());
  ASSERT_TRUE(s.enqueue(make("b")).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  auto waited = rec.times()[0] - start;
  EXPECT_GE(waited, 30ms);
  EXPECT_LT(waited, 2s);
  EXPECT_EQ(rec.batches()[0].size(), 2u);
}

TEST(Scheduler, ZeroDelaySendsAtOnce) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 8;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  Clock::time_point start = Clock::now();
  ASSERT_TRUE(s.enqueue(make("a")).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_LT(rec.times()[0] - start, 1s);
}

TEST(Scheduler, PreferredSizeGoesWithoutWaiting) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 8;
  c.preferred_batch_size = {4};
  c.max_queue_delay_microseconds = 2000000;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  Clock::time_point start = Clock::now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.enqueue(make(std::to_string(i))).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  EXPECT_LT(rec.times()[0] - start, 1s);
  EXPECT_EQ(rec.batches()[0].size(), 4u);
  s.stop();
  EXPECT_EQ(total(rec.batches()), 5u);
}

TEST(Scheduler, HigherPriorityRunsFirst) {
  Recorder rec;
  BatchingConfig c;  // no batching: one request per execution
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  ASSERT_TRUE(s.enqueue(make("block")).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  ASSERT_TRUE(s.enqueue(make("low1", 1, 0)).ok());
  ASSERT_TRUE(s.enqueue(make("low2", 1, 0)).ok());
  ASSERT_TRUE(s.enqueue(make("p2", 1, 2)).ok());
  ASSERT_TRUE(s.enqueue(make("p1", 1, 1)).ok());
  EXPECT_EQ(s.pending(), 4);
  rec.release();
  ASSERT_TRUE(rec.wait_batches(5));
  std::vector<std::string> order;
  for (const auto& b : rec.batches()) order.push_back(b.at(0));
  EXPECT_EQ(order, (std::vector<std::string>{"block", "p1", "p2", "low1", "low2"}));
}

TEST(Scheduler, RequestsPastTheirTimeoutAreRejected) {
  Recorder rec;
  BatchingConfig c;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  ASSERT_TRUE(s.enqueue(make("block")).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  PendingRequest late = make("late");
  late.deadline = Clock::now() + 20ms;
  ASSERT_TRUE(s.enqueue(std::move(late)).ok());
  ASSERT_TRUE(s.enqueue(make("patient")).ok());
  std::this_thread::sleep_for(60ms);
  rec.release();
  ASSERT_TRUE(rec.wait_batches(2));
  s.stop();
  EXPECT_EQ(rec.expired(), (std::vector<std::string>{"late"}));
  auto batches = rec.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1], (std::vector<std::string>{"patient"}));
}

TEST(Scheduler, AFullQueueRejectsWithResourceExhausted) {
  Recorder rec;
  BatchingConfig c;
  c.max_queue_size = 2;
  Scheduler s("m", c, 1, rec.run(), rec.expire());
  ASSERT_TRUE(s.enqueue(make("block")).ok());
  ASSERT_TRUE(rec.wait_batches(1));
  ASSERT_TRUE(s.enqueue(make("a")).ok());
  ASSERT_TRUE(s.enqueue(make("b")).ok());
  Status full = s.enqueue(make("c"));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("max_queue_size 2"), std::string_view::npos) << full.message();
  rec.release();
  s.stop();
  EXPECT_EQ(total(rec.batches()), 3u);
}

TEST(Scheduler, StopDrainsEveryQueuedRequestWithoutWaiting) {
  Recorder rec;
  BatchingConfig c;
  c.max_batch_size = 16;
  c.max_queue_delay_microseconds = 10000000;  // 10 s: only draining sends these
  Scheduler s("m", c, 2, rec.run(), rec.expire());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.enqueue(make(std::to_string(i))).ok());
  Clock::time_point start = Clock::now();
  s.stop();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(total(rec.batches()), 5u);
  EXPECT_EQ(s.enqueue(make("after")).code(), StatusCode::kUnavailable);
}

TEST(Scheduler, InstancesRunBatchesInParallel) {
  std::atomic<int> running{0}, peak{0};
  Scheduler s(
      "m", BatchingConfig{}, 4,
      [&](std::vector<PendingRequest>& batch) {
        int now = ++running;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(30ms);
        --running;
        for (PendingRequest& p : batch) p.done(InferenceResponse{});
      },
      [](PendingRequest&) {});
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(s.enqueue(make(std::to_string(i))).ok());
  s.stop();
  EXPECT_GE(peak.load(), 2);
}

}  // namespace
}  // namespace kiln::server
