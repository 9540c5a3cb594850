// SPDX-License-Identifier: Apache-2.0
// Half (IEEE binary16) and BFloat16 storage types with exact round-to-nearest-even conversion.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
}  // namespace detail

// IEEE 754 binary16. Arithmetic goes through float.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float f) : bits(detail::float_to_half_bits(f)) {}
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT implicit
  friend bool operator==(Half a, Half b) { return float(a) == float(b); }
};

// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) {
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN, keep the sign
    } else {
      uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>((u + rounding) >> 16);
    }
  }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return detail::bits_float(uint32_t{bits} << 16); }  // NOLINT implicit
  friend bool operator==(BFloat16 a, BFloat16 b) { return float(a) == float(b); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace kiln
