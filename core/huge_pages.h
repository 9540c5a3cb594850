// SPDX-License-Identifier: Apache-2.0
// Large, long-lived buffers (packed weights, a session's arena) on transparent huge pages: a
// network's weights are read once per batch-1 run, and on 4 KiB pages every 4 KiB of them needs its
// own TLB entry (a page walk each, 25,000 for ResNet-50's 100 MB).
#pragma once

#include <cstddef>

namespace kiln {

// The huge page size transparent huge pages use (2 MiB on x86-64).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge pages when
// they are first touched (madvise MADV_HUGEPAGE; pages already touched stay as they are). A hint:
// nothing happens where transparent huge pages are off, or the range holds no whole huge page.
void advise_huge_pages(void* data, size_t bytes);

// `bytes` of uninitialized memory for std::free(), aligned to `alignment`, and to kHugePageBytes
// (with advise_huge_pages) when it spans at least one huge page. nullptr when out of memory.
void* alloc_huge_aligned(size_t alignment, size_t bytes);

}  // namespace kiln
