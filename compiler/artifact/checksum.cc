// SPDX-License-Identifier: Apache-2.0
// XXH64, written from the xxHash specification (doc/xxhash_spec.md, "XXH64 algorithm").
#include "compiler/artifact/checksum.h"

#include <algorithm>
#include <cstring>

namespace kiln::compiler {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // the format is little-endian, as is every host kiln builds for
}

inline uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t merge_round(uint64_t acc, uint64_t value) {
  acc ^= round(0, value);
  return acc * kPrime1 + kPrime4;
}

// Consumes 32-byte stripes from `p` while at least 32 bytes remain; returns where it stopped.
inline const uint8_t* stripes(uint64_t acc[4], const uint8_t* p, const uint8_t* end) {
  uint64_t v1 = acc[0], v2 = acc[1], v3 = acc[2], v4 = acc[3];
  while (end - p >= 32) {
    v1 = round(v1, read64(p));
    v2 = round(v2, read64(p + 8));
    v3 = round(v3, read64(p + 16));
    v4 = round(v4, read64(p + 24));
    p += 32;
  }
  acc[0] = v1;
  acc[1] = v2;
  acc[2] = v3;
  acc[3] = v4;
  return p;
}

}  // namespace

Xxhash64::Xxhash64(uint64_t seed)
    : seed_(seed), acc_{seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1} {}

void Xxhash64::update(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  const uint8_t* end = p + bytes.size();
  total_ += bytes.size();
  if (buffered_ > 0) {
    const size_t take = std::min<size_t>(32 - buffered_, bytes.size());
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    if (buffered_ < 32) return;
    stripes(acc_, buffer_, buffer_ + 32);
    buffered_ = 0;
  }
  p = stripes(acc_, p, end);
  buffered_ = static_cast<size_t>(end - p);
  if (buffered_ > 0) std::memcpy(buffer_, p, buffered_);
}

uint64_t Xxhash64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
    for (uint64_t v : acc_) h = merge_round(h, v);
  } else {
    h = seed_ + kPrime5;
  }
  h += total_;
  const uint8_t* p = buffer_;
  const uint8_t* end = buffer_ + buffered_;
  while (end - p >= 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * kPrime1 + kPrime4;
    p += 8;
  }
  if (end - p >= 4) {
    h ^= static_cast<uint64_t>(read32(p)) * kPrime1;
    h = rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kPrime5;
    h = rotl(h, 11) * kPrime1;
    ++p;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

uint64_t xxhash64(std::span<const uint8_t> bytes, uint64_t seed) {
  Xxhash64 h(seed);
  h.update(bytes);
  return h.digest();
}

}  // namespace kiln::compiler
