// SPDX-License-Identifier: Apache-2.0
// The memory planner: buffers live at the same step never overlap, dead space is reused.
#include "compiler/runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::compiler {
namespace {

// Every pair of buffers that are live at a common step occupies disjoint byte ranges.
void expect_no_live_overlap(const std::vector<BufferLifetime>& buffers, const MemoryPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), buffers.size());
  for (size_t a = 0; a < buffers.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % 64, 0u) << "buffer " << a;
    EXPECT_LE(plan.offsets[a] + buffers[a].bytes, plan.arena_bytes) << "buffer " << a;
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      if (buffers[a].bytes == 0 || buffers[b].bytes == 0) continue;
      const bool live_together =
          buffers[a].first <= buffers[b].last && buffers[b].first <= buffers[a].last;
      const bool disjoint = plan.offsets[a] + buffers[a].bytes <= plan.offsets[b] ||
                            plan.offsets[b] + buffers[b].bytes <= plan.offsets[a];
      if (live_together) {
        EXPECT_TRUE(disjoint) << "buffers " << a << " and " << b;
      }
    }
  }
}

TEST(MemoryPlan, AChainReusesTheSpaceOfDeadValues) {
  // x0 -> x1 -> x2 -> x3: each value dies when the next one is made, so two slots suffice.
  std::vector<BufferLifetime> chain = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan plan = plan_memory(chain);
  expect_no_live_overlap(chain, plan);
  EXPECT_EQ(plan.total_bytes, 4000u);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024u);  // two 64-aligned slots of 1000 bytes
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[3]);
}

TEST(MemoryPlan, BuffersLiveTogetherGetDisjointSpace) {
  std::vector<BufferLifetime> all_live = {{100, 0, 5}, {200, 0, 5}, {300, 0, 5}};
  MemoryPlan plan = plan_memory(all_live);
  expect_no_live_overlap(all_live, plan);
  EXPECT_EQ(plan.arena_bytes, 128u + 256u + 320u);
}

TEST(MemoryPlan, ASmallBufferFitsInAGapLeftByLargerOnes) {
  // A big value dies at step 2; a small one born at step 3 reuses its space, not the end.
  std::vector<BufferLifetime> buffers = {{4096, 0, 2}, {4096, 0, 9}, {512, 3, 9}};
  MemoryPlan plan = plan_memory(buffers);
  expect_no_live_overlap(buffers, plan);
  EXPECT_EQ(plan.arena_bytes, 8192u);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
}

TEST(MemoryPlan, RandomLifetimesNeverOverlapAndReuseSpace) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<BufferLifetime> buffers;
    for (int i = 0; i < 60; ++i) {
      int first = static_cast<int>(rng() % 50);
      int last = first + static_cast<int>(rng() % 6);
      buffers.push_back({static_cast<size_t>(rng() % 5000), first, last});
    }
    MemoryPlan plan = plan_memory(buffers);
    expect_no_live_overlap(buffers, plan);
    EXPECT_LT(plan.arena_bytes, plan.total_bytes) << "round " << round;
  }
}

TEST(MemoryPlan, EmptyAndZeroSizedBuffers) {
  EXPECT_EQ(plan_memory({}).arena_bytes, 0u);
  MemoryPlan plan = plan_memory({{0, 0, 3}, {64, 1, 2}});
  EXPECT_EQ(plan.arena_bytes, 64u);
  EXPECT_EQ(plan.offsets[0], 0u);
}

}  // namespace
}  // namespace kiln::compiler
