// SPDX-License-Identifier: Apache-2.0
// keep_freed_memory_for_reuse: two mallopt calls, unless the user tuned glibc themselves.
#include "core/malloc_reuse.h"

#include <cstdlib>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kiln {

bool keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  for (const char* variable :
       {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) {
    if (std::getenv(variable) != nullptr) return false;
  }
  // 32 MiB is the largest mmap threshold glibc takes (HEAP_MAX_SIZE / 2 on 64-bit).
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
  return mmap_set && trim_set;
#else
  return false;
#endif
}

}  // namespace kiln
