// SPDX-License-Identifier: Apache-2.0
// Greedy-by-size arena planning over buffer lifetimes.
#include "compiler/runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace kiln::compiler {

namespace {

size_t align_up(size_t n, size_t alignment) {
  return (n + alignment - 1) & ~(alignment - 1);
}

bool overlaps_in_time(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, size_t alignment) {
  KILN_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0,
             "plan_memory: the alignment must be a power of two");
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first; ties by first use so the plan is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;  // indices already placed, sorted by offset
  for (size_t i : order) {
    const BufferLifetime& buf = buffers[i];
    plan.total_bytes += buf.bytes;
    if (buf.bytes == 0) continue;
    const size_t size = align_up(buf.bytes, alignment);
    // Walk the placed buffers that are live at the same time, in offset order, and take the
    // first gap large enough.
    size_t offset = 0;
    for (size_t j : placed) {
      if (!overlaps_in_time(buf, buffers[j])) continue;
      const size_t begin = plan.offsets[j];
      const size_t end = begin + align_up(buffers[j].bytes, alignment);
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    auto at = std::upper_bound(placed.begin(), placed.end(), offset,
                               [&](size_t off, size_t j) { return off < plan.offsets[j]; });
    placed.insert(at, i);
  }
  return plan;
}

}  // namespace kiln::compiler
