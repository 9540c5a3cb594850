// SPDX-License-Identifier: Apache-2.0
// XXH64, the 64-bit checksum of artifact sections and the hash of source models.
#pragma once

#include <cstdint>
#include <span>

namespace kiln::compiler {

// The XXH64 hash of `bytes` (the xxHash specification's algorithm and values): fast (several GB/s
// on one core) and sensitive to every bit, so truncation, bit flips and edits change it.
uint64_t xxhash64(std::span<const uint8_t> bytes, uint64_t seed = 0);

}  // namespace kiln::compiler
