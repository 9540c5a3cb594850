// SPDX-License-Identifier: Apache-2.0
// The 4- and 2-bit integer storage types of ONNX (int4, uint4, int2, uint2), one value per byte.
#pragma once

#include <cstdint>

namespace kiln {

// A `Bits`-bit integer held in the low bits of one byte (kiln tensors store one element per byte;
// ONNX files pack them, see compiler/onnx/tensor_proto.cc). Only the low `Bits` bits are read, so
// any byte is a valid value. Converting from a wider integer keeps the low bits (wraps, as integer
// Cast does); `saturate` clamps to the range instead (as QuantizeLinear does).
template <int Bits, bool Signed>
struct SmallInt {
  static constexpr int kBits = Bits;
  static constexpr bool kSigned = Signed;
  static constexpr int kMin = Signed ? -(1 << (Bits - 1)) : 0;
  static constexpr int kMax = Signed ? (1 << (Bits - 1)) - 1 : (1 << Bits) - 1;
  static constexpr uint8_t kMask = (1u << Bits) - 1;

  uint8_t bits = 0;

  SmallInt() = default;
  // As ONNX Cast converts a float: truncated toward zero, then wrapped; NaN is 0, and values past
  // the int64 range are clamped to it before wrapping.
  explicit SmallInt(float f) : SmallInt(wrap(truncate(f))) {}
  // The low `Bits` bits of v (two's complement for negative v).
  static SmallInt wrap(int64_t v) { return from_bits(static_cast<uint8_t>(v)); }
  // v clamped to [kMin, kMax].
  static SmallInt saturate(int64_t v) { return wrap(v < kMin ? kMin : v > kMax ? kMax : v); }
  static SmallInt from_bits(uint8_t b) {
    SmallInt s;
    s.bits = static_cast<uint8_t>(b & kMask);
    return s;
  }
  int value() const {
    const int low = bits & kMask;
    if constexpr (Signed) return low >= (1 << (Bits - 1)) ? low - (1 << Bits) : low;
    return low;
  }
  operator int() const { return value(); }  // NOLINT implicit
  friend bool operator==(SmallInt a, SmallInt b) { return a.value() == b.value(); }

 private:
  static int64_t truncate(double v) {
    if (!(v == v)) return 0;  // NaN
    if (v <= -9.2e18) return INT64_MIN;
    if (v >= 9.2e18) return INT64_MAX;
    return static_cast<int64_t>(v);
  }
};

using Int4 = SmallInt<4, true>;
using UInt4 = SmallInt<4, false>;
using Int2 = SmallInt<2, true>;
using UInt2 = SmallInt<2, false>;

static_assert(sizeof(Int4) == 1 && sizeof(UInt2) == 1);

}  // namespace kiln
