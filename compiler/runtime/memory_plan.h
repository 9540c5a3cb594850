// SPDX-License-Identifier: Apache-2.0
// Memory planning: places buffers with known sizes and lifetimes in one arena, reusing space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::compiler {

// A buffer to place: `bytes` long, live from step `first` to step `last` (both inclusive).
struct BufferLifetime {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
};

// Where each buffer lives in the arena, and how large the arena must be.
struct MemoryPlan {
  std::vector<size_t> offsets;  // one per buffer, each a multiple of the alignment
  size_t arena_bytes = 0;
  size_t total_bytes = 0;  // the sum of the buffer sizes (the arena without any reuse)
};

// Places the buffers so that two buffers live at the same step never overlap, largest first,
// each at the lowest aligned offset free over its lifetime (greedy by size, as TFLite's arena
// planner). `alignment` must be a power of two; zero-byte buffers get offset 0.
MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, size_t alignment = 64);

}  // namespace kiln::compiler
