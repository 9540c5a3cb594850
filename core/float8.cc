// SPDX-License-Identifier: Apache-2.0
// Conversions of the narrow float types: decoding by formula, encoding by scaling to the target's
// quantum and rounding once, to nearest even.
#include "core/float8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {
namespace detail {

namespace {

// How a format spends its top codes on specials.
enum class Specials : uint8_t {
  kIeee,  // exponent all ones: inf (mantissa 0) or NaN
  kFn,    // only the all-ones magnitude is NaN (with either sign); no inf
  kFnuz,  // 0x80 (the -0 code) is the only NaN; no inf, no -0
  kNone,  // every code is a number
};

struct Format {
  int exp_bits;
  int mant_bits;
  int bias;
  Specials specials;

  int sign_bit() const { return 1 << (exp_bits + mant_bits); }
  int magnitude_mask() const { return sign_bit() - 1; }
  int exp_ones() const { return (1 << exp_bits) - 1; }
  // The code of the largest finite magnitude.
  int max_magnitude() const {
    switch (specials) {
      case Specials::kIeee: return ((exp_ones() - 1) << mant_bits) | ((1 << mant_bits) - 1);
      case Specials::kFn: return magnitude_mask() - 1;
      case Specials::kFnuz:
      case Specials::kNone: return magnitude_mask();
    }
    return 0;
  }
};

Format format_of(NarrowFloatKind kind) {
  switch (kind) {
    case NarrowFloatKind::kE4M3FN: return {4, 3, 7, Specials::kFn};
    case NarrowFloatKind::kE4M3FNUZ: return {4, 3, 8, Specials::kFnuz};
    case NarrowFloatKind::kE5M2: return {5, 2, 15, Specials::kIeee};
    case NarrowFloatKind::kE5M2FNUZ: return {5, 2, 16, Specials::kFnuz};
    case NarrowFloatKind::kE2M1: return {2, 1, 1, Specials::kNone};
    case NarrowFloatKind::kE8M0: break;
  }
  return {8, 0, 127, Specials::kNone};  // not used: e8m0 has its own code paths
}

bool is_nan(const Format& f, int bits) {
  const int magnitude = bits & f.magnitude_mask();
  switch (f.specials) {
    case Specials::kIeee:
      return (magnitude >> f.mant_bits) == f.exp_ones() && (magnitude & ((1 << f.mant_bits) - 1));
    case Specials::kFn: return magnitude == f.magnitude_mask();
    case Specials::kFnuz: return bits == f.sign_bit();
    case Specials::kNone: return false;
  }
  return false;
}

// The value of a magnitude code (no specials).
double magnitude_value(const Format& f, int magnitude) {
  const int e = magnitude >> f.mant_bits;
  const int m = magnitude & ((1 << f.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits);
  return std::ldexp(static_cast<double>((1 << f.mant_bits) | m), e - f.bias - f.mant_bits);
}

}  // namespace

bool narrow_float_is_nan(NarrowFloatKind kind, uint8_t bits) {
  if (kind == NarrowFloatKind::kE8M0) return bits == 0xff;
  const Format f = format_of(kind);
  return is_nan(f, bits & (f.sign_bit() | f.magnitude_mask()));
}

float narrow_float_to_float(NarrowFloatKind kind, uint8_t bits) {
  if (kind == NarrowFloatKind::kE8M0) {
    if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(bits) - 127);
  }
  const Format f = format_of(kind);
  const int code = bits & (f.sign_bit() | f.magnitude_mask());
  const bool negative = (code & f.sign_bit()) != 0;
  const int magnitude = code & f.magnitude_mask();
  float v;
  if (is_nan(f, code)) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (f.specials == Specials::kIeee && (magnitude >> f.mant_bits) == f.exp_ones()) {
    v = std::numeric_limits<float>::infinity();
  } else {
    v = static_cast<float>(magnitude_value(f, magnitude));  // exact: all values fit in float
  }
  return negative ? -v : v;
}

uint8_t narrow_float_from_double(NarrowFloatKind kind, double v, bool saturate) {
  if (kind == NarrowFloatKind::kE8M0) {
    return float8e8m0_from_float(static_cast<float>(v), saturate, E8M0Rounding::kUp);
  }
  const Format f = format_of(kind);
  saturate = saturate || f.specials == Specials::kNone;
  const int sign = std::signbit(v) ? f.sign_bit() : 0;
  const auto code = [](int c) { return static_cast<uint8_t>(c); };
  if (std::isnan(v)) {
    switch (f.specials) {
      case Specials::kIeee:
        return code(sign | (f.exp_ones() << f.mant_bits) | (1 << (f.mant_bits - 1)));
      case Specials::kFn: return code(sign | f.magnitude_mask());
      case Specials::kFnuz:
      case Specials::kNone: return code(f.sign_bit());
    }
  }
  const auto overflow = [&] {
    if (saturate) return code(sign | f.max_magnitude());
    switch (f.specials) {
      case Specials::kIeee: return code(sign | (f.exp_ones() << f.mant_bits));
      case Specials::kFn: return code(sign | f.magnitude_mask());
      default: return code(f.sign_bit());  // kFnuz: the NaN
    }
  };
  const auto zero = [&] { return code(f.specials == Specials::kFnuz ? 0 : sign); };
  if (std::isinf(v)) return overflow();
  const double a = std::fabs(v);
  if (a == 0.0) return zero();
  int exp = 0;
  std::frexp(a, &exp);  // a = m * 2^exp with m in [0.5, 1)
  // The exponent of the target's quantum at a: normals keep mant_bits bits after the leading one;
  // below the smallest normal exponent the quantum stays that of the subnormals.
  const int scale = std::max(exp - 1, 1 - f.bias) - f.mant_bits;
  double units = std::nearbyint(std::ldexp(a, -scale));  // exact scaling, one rounding
  if (units == 0.0) return zero();
  if (std::ldexp(units, scale) > magnitude_value(f, f.max_magnitude())) return overflow();
  int biased = scale + f.mant_bits + f.bias;  // the exponent field, for a normal
  if (units < std::ldexp(1.0, f.mant_bits)) return code(sign | static_cast<int>(units));
  if (units == std::ldexp(1.0, f.mant_bits + 1)) {  // rounded up into the next binade
    units /= 2;
    ++biased;
  }
  const int mantissa = static_cast<int>(units) - (1 << f.mant_bits);
  return code(sign | (biased << f.mant_bits) | mantissa);
}

uint8_t float8e8m0_from_float(float v, bool saturate, E8M0Rounding rounding) {
  constexpr uint8_t kNaN = 0xff;
  constexpr uint8_t kMax = 0xfe;
  if (std::isnan(v)) return kNaN;
  const double a = std::fabs(static_cast<double>(v));
  if (std::isinf(a)) return saturate ? kMax : kNaN;
  if (a < std::ldexp(1.0, -127)) return saturate ? 0 : kNaN;
  int exp = 0;
  const double m = std::frexp(a, &exp);  // a = (2m) * 2^(exp-1), 2m in [1, 2)
  int e = exp - 1;
  const double fraction = 2 * m - 1;
  switch (rounding) {
    case E8M0Rounding::kUp: e += fraction > 0 ? 1 : 0; break;
    case E8M0Rounding::kDown: break;
    case E8M0Rounding::kNearest: e += fraction >= 0.5 ? 1 : 0; break;
  }
  if (e > 127) return saturate ? kMax : kNaN;
  return static_cast<uint8_t>(e + 127);
}

}  // namespace detail
}  // namespace kiln
