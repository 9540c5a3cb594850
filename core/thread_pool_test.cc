// SPDX-License-Identifier: Apache-2.0
// Tests for ThreadPool: every task and every index runs exactly once, on real threads.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln {
namespace {

using std::chrono::milliseconds;

// Sets (or unsets, for nullopt) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Fails the test unless every counter is exactly one.
void expect_all_once(const std::vector<std::atomic<int>>& counts, std::string_view what) {
  int wrong = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int c = counts[i].load();
    if (c != 1 && ++wrong <= 5)
      ADD_FAILURE() << what << ": index " << i << " ran " << c << " times";
  }
  EXPECT_EQ(wrong, 0) << what;
}

TEST(ThreadPool, Size) {
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_EQ(ThreadPool(1).size(), 1);
  ScopedEnv env("KILN_NUM_THREADS", "5");
  EXPECT_EQ(ThreadPool(0).size(), 5);
  EXPECT_EQ(ThreadPool().size(), 5);
}

TEST(ThreadPool, DefaultThreadCount) {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  {
    ScopedEnv env("KILN_NUM_THREADS", std::nullopt);
    EXPECT_EQ(default_thread_count(), hardware);
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "7");
    EXPECT_EQ(default_thread_count(), 7);
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "0");
    EXPECT_EQ(default_thread_count(), hardware);
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "-3");
    EXPECT_EQ(default_thread_count(), hardware);
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "many");
    EXPECT_EQ(default_thread_count(), hardware);
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "100000");
    EXPECT_EQ(default_thread_count(), 1024);
  }
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  constexpr int kTasks = 5000;
  std::vector<std::atomic<int>> counts(kTasks);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  {
    ThreadPool pool(4);
    for (int i = 0; i < kTasks; ++i) {
      pool.submit([&, i] {
        counts[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(mutex);
        threads.insert(std::this_thread::get_id());
      });
    }
    pool.wait_idle();
    expect_all_once(counts, "after wait_idle");
  }
  expect_all_once(counts, "after destruction");
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), 4u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);  // tasks never run on the submitter
}

TEST(ThreadPool, WaitIdleWithNothingSubmittedReturns) {
  ThreadPool pool(2);
  pool.wait_idle();
  pool.wait_idle();
  SUCCEED();
}

TEST(ThreadPool, WaitIdleWaitsForRunningAndChainedTasks) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  pool.submit([&] {
    std::this_thread::sleep_for(milliseconds(50));
    done.fetch_add(1);
  });
  // A chain: each task submits the next one before it returns.
  constexpr int kChain = 200;
  std::function<void(int)> link = [&](int remaining) {
    done.fetch_add(1);
    if (remaining > 1) pool.submit([&, remaining] { link(remaining - 1); });
  };
  pool.submit([&] { link(kChain); });
  pool.wait_idle();
  EXPECT_EQ(done.load(), 1 + kChain);
}

TEST(ThreadPool, DestructorDrainsQueuedTasks) {
  constexpr int kQueued = 300;
  std::atomic<int> ran{0};
  std::atomic<bool> release{false};
  std::atomic<bool> blocker_started{false};
  std::thread releaser;
  {
    ThreadPool pool(1);
    pool.submit([&] {
      blocker_started = true;
      while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
    });
    for (int i = 0; i < kQueued; ++i) pool.submit([&] { ran.fetch_add(1); });
    while (!blocker_started.load()) std::this_thread::sleep_for(milliseconds(1));
    EXPECT_EQ(ran.load(), 0);
    // The single worker is blocked, so every task is still queued when the destructor starts;
    // the releaser unblocks it only once the destructor is (very likely) waiting on the join.
    releaser = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(50));
      release = true;
    });
  }
  EXPECT_EQ(ran.load(), kQueued);
  releaser.join();
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 100, 999, 4096, 10007}) {
    for (int64_t min_chunk : {-5, 0, 1, 2, 3, 7, 16, 100, 5000, 20000}) {
      std::vector<std::atomic<int>> counts(static_cast<size_t>(n));
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      pool.parallel_for(
          n,
          [&](int64_t begin, int64_t end) {
            ASSERT_LT(begin, end);
            ASSERT_GE(begin, 0);
            ASSERT_LE(end, n);
            for (int64_t i = begin; i < end; ++i) counts[static_cast<size_t>(i)].fetch_add(1);
            std::lock_guard lock(mutex);
            chunks.emplace_back(begin, end);
          },
          min_chunk);
      const std::string what = "n=" + std::to_string(n) + " min_chunk=" + std::to_string(min_chunk);
      expect_all_once(counts, what);
      if (n == 0) {
        EXPECT_TRUE(chunks.empty()) << what;
        continue;
      }
      // At most one chunk per thread (3 workers + the caller), each at least min_chunk long
      // except the one that ends the range.
      EXPECT_LE(chunks.size(), 4u) << what;
      for (auto [begin, end] : chunks) {
        if (end != n) {
          EXPECT_GE(end - begin, min_chunk) << what;
        }
      }
      if (n < 2 * std::max<int64_t>(min_chunk, 1)) {
        EXPECT_EQ(chunks.size(), 1u) << what;
      }
    }
  }
}

TEST(ThreadPool, ParallelForRunsOnSeveralThreads) {
  ThreadPool pool(3);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> entered{0};
  pool.parallel_for(4, [&](int64_t, int64_t) {
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    entered.fetch_add(1);
    // Wait (bounded) until another thread has entered too, so a serial run shows up as a failure.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  EXPECT_GE(threads.size(), 2u);
}

TEST(ThreadPool, ConcurrentParallelForFromSeveralThreads) {
  ThreadPool pool(3);
  constexpr int kCallers = 4;
  constexpr int kRounds = 40;
  constexpr int64_t kN = 1000;
  std::vector<std::unique_ptr<std::vector<std::atomic<int>>>> counts;
  for (int c = 0; c < kCallers; ++c) {
    counts.push_back(std::make_unique<std::vector<std::atomic<int>>>(kN));
  }
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        pool.parallel_for(
            kN,
            [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i)
                (*counts[c])[static_cast<size_t>(i)].fetch_add(1);
            },
            1 + r % 7);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    int wrong = 0;
    for (const std::atomic<int>& v : *counts[c]) wrong += v.load() != kRounds;
    EXPECT_EQ(wrong, 0) << "caller " << c;
  }
  pool.wait_idle();
}

TEST(ThreadPool, SubmitFromManyThreads) {
  ThreadPool pool(2);
  constexpr int kSubmitters = 4;
  constexpr int kEach = 500;
  std::vector<std::atomic<int>> counts(kSubmitters * kEach);
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      for (int i = 0; i < kEach; ++i) {
        pool.submit([&, s, i] { counts[static_cast<size_t>(s * kEach + i)].fetch_add(1); });
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  pool.wait_idle();
  expect_all_once(counts, "submitted from several threads");
}

}  // namespace
}  // namespace kiln
