// SPDX-License-Identifier: Apache-2.0
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/testing/huge_pages.h"

namespace kiln {
namespace {

TEST(HugePages, SmallBuffersKeepTheirAlignment) {
  void* p = alloc_huge_aligned(64, 1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 1000);
  std::free(p);
}

TEST(HugePages, LargeBuffersAreBackedByHugePages) {
  if (!test::thp_available()) {
    GTEST_SKIP() << "transparent huge pages are \"" << test::thp_mode() << "\" here";
  }
  const size_t bytes = 8 * kHugePageBytes + 100;
  auto* p = static_cast<uint8_t*>(alloc_huge_aligned(64, bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  std::memset(p, 7, bytes);  // the first touch: the kernel backs whole huge pages
  EXPECT_EQ(p[bytes - 1], 7);
  // The kernel may fall back to small pages for some (memory too fragmented), not for all.
  EXPECT_GE(test::huge_kib_at(p), static_cast<int64_t>(kHugePageBytes / 1024));
  std::free(p);
}

}  // namespace
}  // namespace kiln
