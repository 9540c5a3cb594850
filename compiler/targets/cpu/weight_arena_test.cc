// SPDX-License-Identifier: Apache-2.0
// The arena packed weights go into (onednn.h): alignment, no overlap, huge pages, and pack()
// using it inside a PackInto scope only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "compiler/targets/cpu/onednn.h"
#include "core/huge_pages.h"
#include "core/testing/huge_pages.h"

namespace kiln::compiler {
namespace {

TEST(WeightArena, AllocationsAreAlignedAndDisjoint) {
  cpu::WeightArena arena;
  // Sizes that fill the first block, overflow it, and need a block of their own.
  const std::vector<size_t> sizes = {100, 4096, 1 << 20, 900 << 10, 3 << 20, 64, 40 << 20, 5};
  std::vector<std::pair<uint8_t*, size_t>> got;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto* p = static_cast<uint8_t*>(arena.allocate(sizes[i]));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "allocation " << i;
    std::memset(p, static_cast<int>(i + 1), sizes[i]);
    got.emplace_back(p, sizes[i]);
  }
  // Every byte still holds what its own allocation wrote: none overlaps another.
  for (size_t i = 0; i < got.size(); ++i) {
    const auto [p, n] = got[i];
    EXPECT_TRUE(std::all_of(p, p + n, [&](uint8_t b) { return b == i + 1; })) << "allocation " << i;
  }
  size_t total = 0;
  for (size_t n : sizes) total += (n + 63) / 64 * 64;
  EXPECT_EQ(arena.used_bytes(), total);
  EXPECT_GE(arena.reserved_bytes(), total);
  // Blocks stay within a huge page or two of what was asked (the 40 MiB one is its own size).
  EXPECT_LE(arena.reserved_bytes(), total + 40 * kHugePageBytes);
}

TEST(WeightArena, LargeWeightsLieOnHugePages) {
  if (!test::thp_available()) {
    GTEST_SKIP() << "transparent huge pages are \"" << test::thp_mode() << "\" here";
  }
  cpu::WeightArena arena;
  ASSERT_NE(arena.allocate(1 << 20), nullptr);  // the first block: small pages
  const size_t bytes = 9 << 20;                 // ResNet-50's layer-4 3x3 weights, spread
  auto* p = static_cast<uint8_t*>(arena.allocate(bytes));
  ASSERT_NE(p, nullptr);
  std::memset(p, 3, bytes);
  EXPECT_GE(test::huge_kib_at(p), static_cast<int64_t>(2 * kHugePageBytes / 1024));
}

TEST(WeightArena, PackUsesTheArenaOfItsScope) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc plain({64, 32, 3, 3}, dnnl::memory::data_type::f32,
                                 dnnl::memory::format_tag::oihw);
  const dnnl::memory::desc blocked({64, 32, 3, 3}, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::OIhw16i16o);
  std::vector<float> w(64 * 32 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) - 48.0f;
  cpu::WeightArena arena;
  dnnl::memory inside;
  {
    const cpu::PackInto scope(&arena);
    inside = cpu::pack(engine, plain, w.data(), blocked);
  }
  const dnnl::memory outside = cpu::pack(engine, plain, w.data(), blocked);
  EXPECT_EQ(arena.used_bytes(), (blocked.get_size() + 63) / 64 * 64);
  EXPECT_NE(inside.get_data_handle(), outside.get_data_handle());
  // Both hold the same packing.
  EXPECT_EQ(std::memcmp(inside.get_data_handle(), outside.get_data_handle(), blocked.get_size()),
            0);
  // And it is a packing: element (o, i, ky, kx) of the blocked layout is w's.
  const auto* packed = static_cast<const float*>(inside.get_data_handle());
  const int64_t o = 37, i = 21, ky = 2, kx = 1;
  const int64_t at = (((o / 16 * 2 + i / 16) * 3 + ky) * 3 + kx) * 256 + i % 16 * 16 + o % 16;
  EXPECT_EQ(packed[at], w[static_cast<size_t>(((o * 32 + i) * 3 + ky) * 3 + kx)]);
}

}  // namespace
}  // namespace kiln::compiler
