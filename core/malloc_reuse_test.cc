// SPDX-License-Identifier: Apache-2.0
// keep_freed_memory_for_reuse: after it, an 8 MiB block comes from the heap (no new mmap), and a
// freed one is handed out again; the user's own glibc settings are left alone.
#include "core/malloc_reuse.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>

namespace kiln {
namespace {

TEST(MallocReuse, UsersGlibcSettingsWin) {
  ASSERT_EQ(setenv("MALLOC_TRIM_THRESHOLD_", "1048576", 1), 0);
  EXPECT_FALSE(keep_freed_memory_for_reuse());
  ASSERT_EQ(unsetenv("MALLOC_TRIM_THRESHOLD_"), 0);
}

TEST(MallocReuse, LargeBlocksComeFromTheHeapAndAreReused) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "glibc's own allocator only";
#else
  if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("GLIBC_TUNABLES")) {
    GTEST_SKIP() << "the environment tunes glibc itself";
  }
  ASSERT_TRUE(keep_freed_memory_for_reuse());
  constexpr size_t kBytes = size_t{8} << 20;
  const size_t mapped_before = mallinfo2().hblks;
  char* a = static_cast<char*>(malloc(kBytes));
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblks, mapped_before) << "an 8 MiB block was mmapped";
  const uintptr_t freed = reinterpret_cast<uintptr_t>(a);
  free(a);
  char* b = static_cast<char*>(malloc(kBytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b), freed) << "the freed block was not handed out again";
  free(b);
#endif
}

}  // namespace
}  // namespace kiln
