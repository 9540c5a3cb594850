// SPDX-License-Identifier: Apache-2.0
// glibc's allocator, tuned for processes that allocate and free the same large buffers over and
// over: a server's request tensors (a 224x224 fp32 image is 588 KiB), a load generator's.
#pragma once

namespace kiln {

// By default glibc serves blocks above a (dynamic) threshold with fresh mmaps and hands freed
// memory at the top of a heap back to the kernel, so a request's buffers are page-faulted in,
// zero-filled by the kernel, on every request. This keeps them: blocks up to 32 MiB come from the
// heaps, and up to 256 MiB freed at a heap's top stays for reuse. A process keeps its peak heap
// size (bounded by the requests in flight) instead of returning it.
//
// Does nothing, and returns false, where the user set glibc's own MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES (theirs win), or where the C library is not glibc.
bool keep_freed_memory_for_reuse();

}  // namespace kiln
