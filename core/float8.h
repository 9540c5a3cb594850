// SPDX-License-Identifier: Apache-2.0
// The 8- and 4-bit float storage types of ONNX (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float4
// e2m1, float8 e8m0) with exact conversion to float and correctly rounded conversion from double.
#pragma once

#include <cstdint>

namespace kiln {

// The encodings. Each stores one value in the low bits of a byte:
//   kE4M3FN    1 sign, 4 exponent (bias 7), 3 mantissa; no inf; S.1111.111 is NaN; max 448
//   kE4M3FNUZ  bias 8; no inf, no -0; 0x80 is the only NaN; max 240
//   kE5M2      bias 15; IEEE-like: inf and NaNs; max 57344
//   kE5M2FNUZ  bias 16; no inf, no -0; 0x80 is the only NaN; max 57344
//   kE2M1      4 bits: 1 sign, 2 exponent (bias 1), 1 mantissa; no inf, no NaN; max 6
//   kE8M0      8 exponent bits only (bias 127), no sign: 2^(e-127); 0xff is NaN
enum class NarrowFloatKind : uint8_t { kE4M3FN, kE4M3FNUZ, kE5M2, kE5M2FNUZ, kE2M1, kE8M0 };

// How a value becomes float8 e8m0 (ONNX Cast's `round_mode`): the exponent of |x| rounded up when
// x is not a power of two, down (truncated), or to the nearest (ties up).
enum class E8M0Rounding : uint8_t { kUp, kDown, kNearest };

namespace detail {
// The exact value of `bits`, NaN for the NaN encodings.
float narrow_float_to_float(NarrowFloatKind kind, uint8_t bits);
// `v` rounded to nearest even. Out of range (after rounding) and infinities become the largest
// finite value when `saturate`; otherwise inf (e5m2) or NaN (the others). kE2M1 always saturates
// and has no NaN: NaN becomes 0x8 (its -0 code), as ONNX's reference does. The fnuz kinds turn
// -0 (and negatives that round to 0) into +0. kE8M0 converts as `float8e8m0_from_float` rounding
// up.
uint8_t narrow_float_from_double(NarrowFloatKind kind, double v, bool saturate);
// ONNX Cast to float8e8m0: NaN is NaN; ±inf is the largest value when `saturate`, else NaN; the
// sign is ignored (negative inputs are unspecified by ONNX); 0 and values below 2^-127 give 2^-127
// when `saturate`, else NaN (a non-zero value that rounds to 2^-127 stays 2^-127); a rounded
// exponent past 2^127 saturates or is NaN.
uint8_t float8e8m0_from_float(float v, bool saturate, E8M0Rounding rounding);
bool narrow_float_is_nan(NarrowFloatKind kind, uint8_t bits);
}  // namespace detail

// One narrow float in one byte. Arithmetic goes through float, as for Half; the ref kernels keep
// these types out of arithmetic ops (they convert only: Cast, QuantizeLinear, DequantizeLinear).
template <NarrowFloatKind K>
struct NarrowFloat {
  static constexpr NarrowFloatKind kKind = K;
  uint8_t bits = 0;

  NarrowFloat() = default;
  // Rounds to nearest even and saturates (ONNX Cast's default).
  explicit NarrowFloat(float f) : bits(detail::narrow_float_from_double(K, f, true)) {}
  static NarrowFloat from_double(double v, bool saturate = true) {
    return from_bits(detail::narrow_float_from_double(K, v, saturate));
  }
  static NarrowFloat from_bits(uint8_t b) {
    NarrowFloat h;
    h.bits = b;
    return h;
  }
  bool is_nan() const { return detail::narrow_float_is_nan(K, bits); }
  operator float() const { return detail::narrow_float_to_float(K, bits); }  // NOLINT implicit
  // The same encoded value: all NaNs are equal to each other and -0 differs from +0, so that
  // tensors of these types compare as data (the narrow types are never computed with).
  friend bool operator==(NarrowFloat a, NarrowFloat b) {
    return a.bits == b.bits || (a.is_nan() && b.is_nan());
  }
};

using Float8E4M3FN = NarrowFloat<NarrowFloatKind::kE4M3FN>;
using Float8E4M3FNUZ = NarrowFloat<NarrowFloatKind::kE4M3FNUZ>;
using Float8E5M2 = NarrowFloat<NarrowFloatKind::kE5M2>;
using Float8E5M2FNUZ = NarrowFloat<NarrowFloatKind::kE5M2FNUZ>;
using Float4E2M1 = NarrowFloat<NarrowFloatKind::kE2M1>;
using Float8E8M0 = NarrowFloat<NarrowFloatKind::kE8M0>;

static_assert(sizeof(Float8E4M3FN) == 1 && sizeof(Float4E2M1) == 1 && sizeof(Float8E8M0) == 1);

}  // namespace kiln
