// SPDX-License-Identifier: Apache-2.0
// XXH64, the 64-bit checksum of artifact sections and the hash of source models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kiln::compiler {

// XXH64 over bytes given in pieces (the xxHash specification's algorithm and values): fast
// (several GB/s on one core) and sensitive to every bit, so truncation, bit flips and edits
// change it. Pieces of any sizes give the digest of their concatenation.
class Xxhash64 {
 public:
  explicit Xxhash64(uint64_t seed = 0);
  void update(std::span<const uint8_t> bytes);
  uint64_t digest() const;

 private:
  uint64_t seed_;
  uint64_t acc_[4];
  uint64_t total_ = 0;
  uint8_t buffer_[32];
  size_t buffered_ = 0;
};

// The XXH64 hash of `bytes` in one call.
uint64_t xxhash64(std::span<const uint8_t> bytes, uint64_t seed = 0);

}  // namespace kiln::compiler
