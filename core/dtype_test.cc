// SPDX-License-Identifier: Apache-2.0
// Tests for DType sizes, names and parsing, visit_dtype, and the Half/BFloat16 conversions.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln {
namespace {

const DType kAllDTypes[] = {
    DType::kF32,        DType::kF16,    DType::kBF16,       DType::kF64,    DType::kI8,
    DType::kU8,         DType::kI16,    DType::kU16,        DType::kI32,    DType::kU32,
    DType::kI64,        DType::kU64,    DType::kBool,       DType::kString, DType::kF8E4M3FN,
    DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ, DType::kU4,     DType::kI4,
    DType::kF4E2M1,     DType::kF8E8M0, DType::kU2,         DType::kI2};
static_assert(std::size(kAllDTypes) == kNumDTypes);

TEST(Dtype, SizesAndNames) {
  struct Case {
    DType dtype;
    size_t size;
    std::string_view name;
    int bits;
  };
  const Case cases[] = {
      {DType::kF32, 4, "f32", 32},
      {DType::kF16, 2, "f16", 16},
      {DType::kBF16, 2, "bf16", 16},
      {DType::kF64, 8, "f64", 64},
      {DType::kI8, 1, "i8", 8},
      {DType::kU8, 1, "u8", 8},
      {DType::kI16, 2, "i16", 16},
      {DType::kU16, 2, "u16", 16},
      {DType::kI32, 4, "i32", 32},
      {DType::kU32, 4, "u32", 32},
      {DType::kI64, 8, "i64", 64},
      {DType::kU64, 8, "u64", 64},
      {DType::kBool, 1, "bool", 8},
      {DType::kString, sizeof(std::string), "string", 0},
      {DType::kF8E4M3FN, 1, "f8e4m3fn", 8},
      {DType::kF8E4M3FNUZ, 1, "f8e4m3fnuz", 8},
      {DType::kF8E5M2, 1, "f8e5m2", 8},
      {DType::kF8E5M2FNUZ, 1, "f8e5m2fnuz", 8},
      {DType::kU4, 1, "u4", 4},
      {DType::kI4, 1, "i4", 4},
      {DType::kF4E2M1, 1, "f4e2m1", 4},
      {DType::kF8E8M0, 1, "f8e8m0", 8},
      {DType::kU2, 1, "u2", 2},
      {DType::kI2, 1, "i2", 2},
  };
  static_assert(std::size(cases) == kNumDTypes);
  for (const Case& c : cases) {
    EXPECT_EQ(dtype_size(c.dtype), c.size) << c.name;
    EXPECT_EQ(dtype_bits(c.dtype), c.bits) << c.name;
    EXPECT_EQ(dtype_name(c.dtype), c.name);
    // Every short name parses back to its dtype.
    EXPECT_EQ(parse_dtype(c.name), c.dtype) << c.name;
  }
}

TEST(Dtype, ParseAliases) {
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float"), DType::kF32);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float64"), DType::kF64);
  EXPECT_EQ(parse_dtype("double"), DType::kF64);
  EXPECT_EQ(parse_dtype("int8"), DType::kI8);
  EXPECT_EQ(parse_dtype("uint8"), DType::kU8);
  EXPECT_EQ(parse_dtype("int16"), DType::kI16);
  EXPECT_EQ(parse_dtype("uint16"), DType::kU16);
  EXPECT_EQ(parse_dtype("int32"), DType::kI32);
  EXPECT_EQ(parse_dtype("uint32"), DType::kU32);
  EXPECT_EQ(parse_dtype("int64"), DType::kI64);
  EXPECT_EQ(parse_dtype("uint64"), DType::kU64);
  EXPECT_EQ(parse_dtype("str"), DType::kString);
  EXPECT_EQ(parse_dtype("float8e4m3fn"), DType::kF8E4M3FN);
  EXPECT_EQ(parse_dtype("float8e4m3fnuz"), DType::kF8E4M3FNUZ);
  EXPECT_EQ(parse_dtype("float8e5m2"), DType::kF8E5M2);
  EXPECT_EQ(parse_dtype("float8e5m2fnuz"), DType::kF8E5M2FNUZ);
  EXPECT_EQ(parse_dtype("float8e8m0"), DType::kF8E8M0);
  EXPECT_EQ(parse_dtype("float4e2m1"), DType::kF4E2M1);
  EXPECT_EQ(parse_dtype("int4"), DType::kI4);
  EXPECT_EQ(parse_dtype("uint4"), DType::kU4);
  EXPECT_EQ(parse_dtype("int2"), DType::kI2);
  EXPECT_EQ(parse_dtype("uint2"), DType::kU2);
}

// The values are stored in artifacts: they must never change.
TEST(Dtype, ValuesAreStable) {
  EXPECT_EQ(static_cast<int>(DType::kF32), 0);
  EXPECT_EQ(static_cast<int>(DType::kBool), 12);
  EXPECT_EQ(static_cast<int>(DType::kString), 13);
  EXPECT_EQ(static_cast<int>(DType::kF8E4M3FN), 14);
  EXPECT_EQ(static_cast<int>(DType::kF8E8M0), 21);
  EXPECT_EQ(static_cast<int>(DType::kI2), 23);
}

TEST(Dtype, ParseRejectsUnknownNames) {
  for (std::string_view bad : {"", "F32", "f 32", "float8", "int", "complex64", "f32 ", "bf"}) {
    EXPECT_EQ(parse_dtype(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(Dtype, Categories) {
  for (DType d : kAllDTypes) {
    const std::string_view n = dtype_name(d);
    const bool narrow = static_cast<int>(d) > static_cast<int>(DType::kString);
    const bool is_float = n == "f16" || n == "bf16" || n == "f32" || n == "f64";
    const bool is_int = !narrow && (n[0] == 'i' || n[0] == 'u');
    const bool is_signed = is_float || (is_int && n[0] == 'i');
    EXPECT_EQ(dtype_is_float(d), is_float) << n;
    EXPECT_EQ(dtype_is_integer(d), is_int) << n;
    EXPECT_EQ(dtype_is_signed(d), is_signed) << n;
    EXPECT_EQ(dtype_is_narrow(d), narrow) << n;
    EXPECT_EQ(dtype_is_narrow_float(d), narrow && n[0] == 'f') << n;
    EXPECT_EQ(dtype_is_narrow_integer(d), narrow && n[0] != 'f') << n;
  }
}

TEST(Dtype, VisitDtypeCallsTheMatchingType) {
  for (DType d : kAllDTypes) {
    // The visitor's return value comes back through visit_dtype.
    const size_t size = visit_dtype(d, [&]<class T>() {
      EXPECT_EQ(dtype_of<T>(), d) << dtype_name(d);
      return sizeof(T);
    });
    EXPECT_EQ(size, dtype_size(d)) << dtype_name(d);
  }
  EXPECT_TRUE((std::is_same_v<dtype_type_t<DType::kBF16>, BFloat16>));
  EXPECT_TRUE((std::is_same_v<dtype_type_t<DType::kU16>, uint16_t>));
  EXPECT_TRUE((std::is_same_v<dtype_type_t<DType::kBool>, bool>));
  EXPECT_TRUE((std::is_same_v<dtype_type_t<DType::kF8E5M2>, Float8E5M2>));
  EXPECT_TRUE((std::is_same_v<dtype_type_t<DType::kI4>, Int4>));

  std::vector<std::string> seen;
  visit_dtype(DType::kString, [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) seen.push_back("string");
  });
  EXPECT_EQ(seen, std::vector<std::string>{"string"});
}

uint16_t half_bits(float f) {
  return Half(f).bits;
}
float half_value(uint16_t bits) {
  return static_cast<float>(Half::from_bits(bits));
}

TEST(Dtype, HalfExactValues) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.5f), 0xc100);
  EXPECT_EQ(half_bits(0.5f), 0x3800);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);  // the largest finite half
  EXPECT_EQ(half_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(half_bits(0.1f), 0x2e66);
  EXPECT_EQ(half_value(0x3c00), 1.0f);
  EXPECT_EQ(half_value(0x7bff), 65504.0f);
  EXPECT_EQ(half_value(0x2e66), 0.0999755859375f);
  EXPECT_EQ(half_value(0xc100), -2.5f);
}

TEST(Dtype, HalfOverflow) {
  // 65520 is the midpoint between 65504 and 2^16; ties-to-even picks 2^16, which is inf.
  EXPECT_EQ(half_bits(65519.996f), 0x7bff);
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);
  EXPECT_EQ(half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(half_bits(1e10f), 0x7c00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isinf(half_value(0x7c00)));
  EXPECT_GT(half_value(0x7c00), 0.0f);
  EXPECT_LT(half_value(0xfc00), 0.0f);
}

TEST(Dtype, HalfSubnormals) {
  const float two_m24 = std::ldexp(1.0f, -24);  // the smallest subnormal half
  const float two_m14 = std::ldexp(1.0f, -14);  // the smallest normal half
  EXPECT_EQ(half_bits(two_m24), 0x0001);
  EXPECT_EQ(half_value(0x0001), two_m24);
  EXPECT_EQ(half_value(0x8001), -two_m24);
  EXPECT_EQ(half_bits(two_m14), 0x0400);
  EXPECT_EQ(half_bits(two_m14 - two_m24), 0x03ff);  // the largest subnormal
  EXPECT_EQ(half_value(0x03ff), two_m14 - two_m24);
  EXPECT_EQ(half_bits(3 * two_m24), 0x0003);
  // 2^-25 is the midpoint between 0 and 2^-24: ties to even gives 0; a hair above rounds up.
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -25)), 0x8000);
  // 1.5 * 2^-24 is a tie between 1 and 2 ulps: even is 2. 2.5 * 2^-24 ties to 2 as well.
  EXPECT_EQ(half_bits(1.5f * two_m24), 0x0002);
  EXPECT_EQ(half_bits(2.5f * two_m24), 0x0002);
  EXPECT_EQ(half_bits(1e-8f), 0x0000);
  EXPECT_EQ(half_bits(-1e-8f), 0x8000);
  // A subnormal that rounds up into the smallest normal.
  EXPECT_EQ(half_bits(two_m14 - 0.25f * two_m24), 0x0400);
}

TEST(Dtype, HalfRoundingTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);           // one half ulp at 1.0
  EXPECT_EQ(half_bits(1.0f + ulp / 2), 0x3c00);      // tie, 0x3c00 is even
  EXPECT_EQ(half_bits(1.0f + 3 * ulp / 2), 0x3c02);  // tie, 0x3c01 is odd -> up
  EXPECT_EQ(half_bits(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(half_bits(std::nextafter(1.0f + ulp / 2, 0.0f)), 0x3c00);
  EXPECT_EQ(half_bits(2048.0f + 1.0f), 0x6800);  // 2049 ties between 2048 and 2050
  EXPECT_EQ(half_bits(2048.0f + 3.0f), 0x6802);  // 2051 ties to 2052
}

TEST(Dtype, HalfNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint16_t h = half_bits(nan);
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(half_value(h)));
  EXPECT_TRUE(std::isnan(half_value(0x7e00)));
  EXPECT_TRUE(std::isnan(half_value(0xfc01)));
  EXPECT_EQ(half_bits(-nan) & 0x8000, 0x8000);
  EXPECT_FALSE(Half(nan) == Half(nan));
  EXPECT_TRUE(Half(0.0f) == Half(-0.0f));
}

// Every finite half survives half -> float -> half, and every midpoint between neighbouring
// halves rounds to the one with an even mantissa.
TEST(Dtype, HalfExhaustiveRoundTripAndMidpoints) {
  int failures = 0;
  for (uint32_t b = 0; b < 0x10000 && failures < 10; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = half_value(bits);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0) {
      if (!std::isnan(f) || (half_bits(f) & 0x7fff) <= 0x7c00) ++failures;
      continue;
    }
    if (half_bits(f) != bits) {
      ADD_FAILURE() << "half 0x" << std::hex << b << " -> " << f << " -> 0x" << half_bits(f);
      ++failures;
    }
    if ((bits & 0x7fff) >= 0x7bff) continue;  // no finite upper neighbour
    const uint16_t next = static_cast<uint16_t>(bits + 1);
    const double mid = (static_cast<double>(f) + half_value(next)) / 2;
    const auto mid_f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(mid_f), mid);  // midpoints are exact in float
    const uint16_t even = (bits & 1) == 0 ? bits : next;
    if (half_bits(mid_f) != even) {
      ADD_FAILURE() << "midpoint above 0x" << std::hex << b << " rounds to 0x" << half_bits(mid_f)
                    << ", expected 0x" << even;
      ++failures;
    }
    // Just above and just below the midpoint round away from the tie.
    const float away = std::nextafter(mid_f, bits & 0x8000 ? -1e9f : 1e9f);
    const float toward = std::nextafter(mid_f, 0.0f);
    if (half_bits(away) != next || half_bits(toward) != bits) {
      ADD_FAILURE() << "neighbours of the midpoint above 0x" << std::hex << b;
      ++failures;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Dtype, BFloat16Conversions) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(BFloat16(0.0f).bits, 0x0000);
  EXPECT_EQ(BFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x3f80)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x4049)), 3.140625f);
  EXPECT_EQ(BFloat16(3.14159265f).bits, 0x4049);
  // Ties to even: 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81.
  EXPECT_EQ(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(BFloat16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)).bits, 0x3f81);
  // Overflow to inf, inf stays inf, the largest finite bf16 stays finite.
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(BFloat16(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  EXPECT_EQ(BFloat16(static_cast<float>(BFloat16::from_bits(0x7f7f))).bits, 0x7f7f);
  // Subnormals keep their top bits.
  EXPECT_EQ(BFloat16(std::ldexp(1.0f, -133)).bits, 0x0001);
  // NaN stays NaN (quiet), including a signalling NaN whose payload sits in the low bits only.
  const BFloat16 nan(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(static_cast<float>(nan)));
  const BFloat16 snan(detail::bits_float(0x7f800001u));
  EXPECT_TRUE(std::isnan(static_cast<float>(snan)));
  EXPECT_EQ(snan.bits, 0x7fc0);
  EXPECT_EQ(BFloat16(detail::bits_float(0xff800001u)).bits, 0xffc0);
  EXPECT_FALSE(nan == nan);
}

TEST(Dtype, BFloat16RoundTripsEveryFiniteValue) {
  int failures = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const BFloat16 v = BFloat16::from_bits(static_cast<uint16_t>(b));
    const float f = v;
    if (std::isnan(f)) continue;
    if (BFloat16(f).bits != b) ++failures;
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace kiln
