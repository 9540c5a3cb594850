// SPDX-License-Identifier: Apache-2.0
#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace kiln {

void advise_huge_pages(void* data, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t last = (begin + bytes) / kHugePageBytes * kHugePageBytes;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void* alloc_huge_aligned(size_t alignment, size_t bytes) {
  if (bytes < kHugePageBytes) {
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  // aligned_alloc wants a multiple of the alignment; the rounding stays unused.
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(alignment > kHugePageBytes ? alignment : kHugePageBytes, rounded);
  if (p != nullptr) advise_huge_pages(p, rounded);
  return p;
}

}  // namespace kiln
