// SPDX-License-Identifier: Apache-2.0
// Tests for the narrow float types: every code's value, round trips, rounding ties, saturation,
// NaN, infinities, subnormals and -0, checked against ONNX's tables and its test data.
#include "core/float8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
uint8_t encode(double v, bool saturate = true) {
  return T::from_double(v, saturate).bits;
}
template <class T>
float decode(uint8_t bits) {
  return static_cast<float>(T::from_bits(bits));
}

TEST(Float8, E4M3FNValues) {
  using T = Float8E4M3FN;
  EXPECT_EQ(decode<T>(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(decode<T>(0x80)));  // -0
  EXPECT_EQ(decode<T>(0x38), 1.0f);
  EXPECT_EQ(decode<T>(0x7e), 448.0f);  // the largest finite value
  EXPECT_EQ(decode<T>(0xfe), -448.0f);
  EXPECT_EQ(decode<T>(0x78), 256.0f);                // exponent all ones holds numbers
  EXPECT_EQ(decode<T>(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(decode<T>(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(decode<T>(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_TRUE(std::isnan(decode<T>(0x7f)));
  EXPECT_TRUE(std::isnan(decode<T>(0xff)));
}

TEST(Float8, E4M3FNUZValues) {
  using T = Float8E4M3FNUZ;
  EXPECT_EQ(decode<T>(0x00), 0.0f);
  EXPECT_TRUE(std::isnan(decode<T>(0x80)));  // the only NaN, where -0 would be
  EXPECT_EQ(decode<T>(0x40), 1.0f);
  EXPECT_EQ(decode<T>(0x7f), 240.0f);
  EXPECT_EQ(decode<T>(0xff), -240.0f);
  EXPECT_EQ(decode<T>(0x01), std::ldexp(1.0f, -10));
  EXPECT_EQ(decode<T>(0x81), -std::ldexp(1.0f, -10));
}

TEST(Float8, E5M2Values) {
  using T = Float8E5M2;
  EXPECT_EQ(decode<T>(0x3c), 1.0f);
  EXPECT_EQ(decode<T>(0x7b), 57344.0f);
  EXPECT_EQ(decode<T>(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(decode<T>(0xfc), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(decode<T>(0x7d)));
  EXPECT_TRUE(std::isnan(decode<T>(0x7e)));
  EXPECT_TRUE(std::isnan(decode<T>(0xff)));
  EXPECT_EQ(decode<T>(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::signbit(decode<T>(0x80)));
}

TEST(Float8, E5M2FNUZValues) {
  using T = Float8E5M2FNUZ;
  EXPECT_EQ(decode<T>(0x40), 1.0f);
  EXPECT_EQ(decode<T>(0x7f), 57344.0f);
  EXPECT_EQ(decode<T>(0x7c), 32768.0f);
  EXPECT_TRUE(std::isnan(decode<T>(0x80)));
  EXPECT_EQ(decode<T>(0x01), std::ldexp(1.0f, -17));
}

TEST(Float8, E2M1Values) {
  using T = Float4E2M1;
  const float values[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(decode<T>(static_cast<uint8_t>(c)), values[c]) << c;
    EXPECT_EQ(decode<T>(static_cast<uint8_t>(c | 8)), -values[c]) << c;
  }
  EXPECT_TRUE(std::signbit(decode<T>(0x8)));
  // Only the low four bits count.
  EXPECT_EQ(decode<T>(0xf3), 1.5f);
  EXPECT_EQ(decode<T>(0x3b), -1.5f);
}

TEST(Float8, E8M0Values) {
  using T = Float8E8M0;
  EXPECT_EQ(decode<T>(0x7f), 1.0f);
  EXPECT_EQ(decode<T>(0x80), 2.0f);
  EXPECT_EQ(decode<T>(0x7c), 0.125f);
  EXPECT_EQ(decode<T>(0x00), std::ldexp(1.0f, -127));  // a float subnormal, exact
  EXPECT_EQ(decode<T>(0xfe), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(decode<T>(0xff)));
}

// ONNX's Cast tests (test_cast_FLOAT_to_FLOAT8* and test_cast_no_saturate_*): the expected codes.
TEST(Float8, OnnxCastTestVectors) {
  const double in[] = {0.47892547f, 0.48033667f, 0.49968487f, 0.81910545f, 0.47031248f,
                       0.7229038f,  1000000.0f,  1e-7f,       kNaN,        kInf,
                       kInf,        -kInf,       -1e-7f,      1e-7f,       -1000000.0f};
  struct Case {
    std::string name;
    std::vector<int> saturated;
    std::vector<int> unsaturated;
    uint8_t (*convert)(double, bool);
  };
  const Case cases[] = {
      {"e4m3fn",
       {0x2f, 0x2f, 0x30, 0x35, 0x2f, 0x34, 0x7e, 0x0, 0x7f, 0x7e, 0x7e, 0xfe, 0x80, 0x0, 0xfe},
       {0x2f, 0x2f, 0x30, 0x35, 0x2f, 0x34, 0x7f, 0x0, 0x7f, 0x7f, 0x7f, 0xff, 0x80, 0x0, 0xff},
       encode<Float8E4M3FN>},
      {"e4m3fnuz",
       {0x37, 0x37, 0x38, 0x3d, 0x37, 0x3c, 0x7f, 0x0, 0x80, 0x7f, 0x7f, 0xff, 0x0, 0x0, 0xff},
       {0x37, 0x37, 0x38, 0x3d, 0x37, 0x3c, 0x80, 0x0, 0x80, 0x80, 0x80, 0x80, 0x0, 0x0, 0x80},
       encode<Float8E4M3FNUZ>},
      {"e5m2",
       {0x38, 0x38, 0x38, 0x3b, 0x38, 0x3a, 0x7b, 0x0, 0x7e, 0x7b, 0x7b, 0xfb, 0x80, 0x0, 0xfb},
       {0x38, 0x38, 0x38, 0x3b, 0x38, 0x3a, 0x7c, 0x0, 0x7e, 0x7c, 0x7c, 0xfc, 0x80, 0x0, 0xfc},
       encode<Float8E5M2>},
      {"e5m2fnuz",
       {0x3c, 0x3c, 0x3c, 0x3f, 0x3c, 0x3e, 0x7f, 0x0, 0x80, 0x7f, 0x7f, 0xff, 0x0, 0x0, 0xff},
       {0x3c, 0x3c, 0x3c, 0x3f, 0x3c, 0x3e, 0x80, 0x0, 0x80, 0x80, 0x80, 0x80, 0x0, 0x0, 0x80},
       encode<Float8E5M2FNUZ>},
  };
  for (const Case& c : cases) {
    for (size_t i = 0; i < std::size(in); ++i) {
      EXPECT_EQ(c.convert(in[i], true), c.saturated[i]) << c.name << " saturated, input " << i;
      EXPECT_EQ(c.convert(in[i], false), c.unsaturated[i]) << c.name << " input " << i;
    }
  }
}

// test_cast_FLOAT_to_FLOAT4E2M1: ties to even, saturation at ±6, NaN to the -0 code.
TEST(Float8, OnnxFloat4TestVector) {
  const double in[] = {0.48, 0.25, 1.05, -3.5,  -8, 9,    1000000, 1e-7,
                       kNaN, kInf, kInf, -kInf, -4, 0.01, -0.0};
  const int expected[] = {0x1, 0x0, 0x2, 0xe, 0xf, 0x7, 0x7, 0x0,
                          0x8, 0x7, 0x7, 0xf, 0xe, 0x0, 0x8};
  for (size_t i = 0; i < std::size(in); ++i) {
    EXPECT_EQ(encode<Float4E2M1>(in[i]), expected[i]) << "input " << i;
    // saturate=0 does not apply to float4: it has no inf and no NaN to overflow to.
    EXPECT_EQ(encode<Float4E2M1>(in[i], false), expected[i]) << "input " << i;
  }
}

TEST(Float8, NegativeZero) {
  EXPECT_EQ(encode<Float8E4M3FN>(-0.0), 0x80);
  EXPECT_EQ(encode<Float8E5M2>(-0.0), 0x80);
  EXPECT_EQ(encode<Float4E2M1>(-0.0), 0x8);
  // fnuz types have no -0: -0 and negatives that round to zero are +0, never the NaN code.
  EXPECT_EQ(encode<Float8E4M3FNUZ>(-0.0), 0x00);
  EXPECT_EQ(encode<Float8E5M2FNUZ>(-0.0), 0x00);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(-std::ldexp(1.0, -12)), 0x00);
  EXPECT_EQ(encode<Float8E5M2FNUZ>(-std::ldexp(1.0, -19), false), 0x00);
  // A negative fnuz subnormal keeps its sign.
  EXPECT_EQ(encode<Float8E4M3FNUZ>(-std::ldexp(1.0, -10)), 0x81);
}

TEST(Float8, Subnormals) {
  // e4m3fn: quantum 2^-9 below 2^-6. Half a quantum ties to 0 (even), above rounds up.
  EXPECT_EQ(encode<Float8E4M3FN>(std::ldexp(1.0, -10)), 0x00);
  EXPECT_EQ(encode<Float8E4M3FN>(std::nextafter(std::ldexp(1.0, -10), 1.0)), 0x01);
  EXPECT_EQ(encode<Float8E4M3FN>(3 * std::ldexp(1.0, -10)), 0x02);  // 1.5 quanta: tie to 2
  EXPECT_EQ(encode<Float8E4M3FN>(5 * std::ldexp(1.0, -10)), 0x02);  // 2.5 quanta: tie to 2
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(encode<Float8E4M3FN>(7.75 * std::ldexp(1.0, -9)), 0x08);
  EXPECT_EQ(encode<Float8E5M2>(std::ldexp(1.0, -16)), 0x01);
  EXPECT_EQ(encode<Float8E5M2>(std::ldexp(1.0, -17)), 0x00);
  EXPECT_EQ(encode<Float8E5M2FNUZ>(std::ldexp(1.0, -17)), 0x01);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(std::ldexp(1.0, -10)), 0x01);
  EXPECT_EQ(encode<Float4E2M1>(0.25), 0x0);
  EXPECT_EQ(encode<Float4E2M1>(0.26), 0x1);
  EXPECT_EQ(encode<Float4E2M1>(0.75), 0x2);  // tie between 0.5 (odd) and 1.0 (even)
  // Inputs far below a double's float range round to zero, not to a crash or a subnormal.
  EXPECT_EQ(encode<Float8E4M3FN>(1e-300), 0x00);
  EXPECT_EQ(encode<Float8E4M3FN>(-1e-320), 0x80);
}

TEST(Float8, SaturationBoundary) {
  // e4m3fn: 448 is the max; 464 is the tie between 448 (mantissa 110, even) and 480 (unencodable).
  EXPECT_EQ(encode<Float8E4M3FN>(464.0, false), 0x7e);
  EXPECT_EQ(encode<Float8E4M3FN>(std::nextafter(464.0, 1e9), false), 0x7f);  // NaN
  EXPECT_EQ(encode<Float8E4M3FN>(std::nextafter(464.0, 1e9), true), 0x7e);
  EXPECT_EQ(encode<Float8E4M3FN>(-1e300, false), 0xff);
  EXPECT_EQ(encode<Float8E4M3FN>(-1e300, true), 0xfe);
  // e5m2: 57344 is the max; 61440 is the tie with 65536 (the next binade: inf).
  EXPECT_EQ(encode<Float8E5M2>(61439.0, false), 0x7b);
  EXPECT_EQ(encode<Float8E5M2>(61440.0, false), 0x7c);
  EXPECT_EQ(encode<Float8E5M2>(61440.0, true), 0x7b);
  EXPECT_EQ(encode<Float8E5M2>(-kInf, false), 0xfc);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(247.9, false), 0x7f);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(248.0, false), 0x80);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(-248.0, true), 0xff);
  EXPECT_EQ(encode<Float8E5M2FNUZ>(kInf, true), 0x7f);
  EXPECT_EQ(encode<Float4E2M1>(5.0), 0x6);  // tie between 4 (even) and 6
  EXPECT_EQ(encode<Float4E2M1>(5.01), 0x7);
  EXPECT_EQ(encode<Float4E2M1>(7.0), 0x7);
}

TEST(Float8, NaNKeepsItsSignWhereTheTypeHasOne) {
  const double neg_nan = -kNaN;
  ASSERT_TRUE(std::signbit(neg_nan));
  EXPECT_EQ(encode<Float8E4M3FN>(neg_nan), 0xff);
  EXPECT_EQ(encode<Float8E5M2>(neg_nan), 0xfe);
  EXPECT_EQ(encode<Float8E4M3FNUZ>(neg_nan), 0x80);
  EXPECT_EQ(encode<Float8E5M2FNUZ>(neg_nan), 0x80);
  EXPECT_TRUE(Float8E4M3FN::from_bits(0x7f).is_nan());
  EXPECT_FALSE(Float8E4M3FN::from_bits(0x7e).is_nan());
  EXPECT_TRUE(Float8E5M2::from_bits(0x7d).is_nan());
  EXPECT_FALSE(Float8E5M2::from_bits(0x7c).is_nan());
  EXPECT_FALSE(Float4E2M1::from_bits(0x8).is_nan());
}

TEST(Float8, EqualityComparesData) {
  // Unlike Half, NaNs compare equal (tensors of these types are compared as data) and -0 != +0.
  EXPECT_TRUE(Float8E5M2::from_bits(0x7d) == Float8E5M2::from_bits(0xfe));
  EXPECT_FALSE(Float8E4M3FN::from_bits(0x00) == Float8E4M3FN::from_bits(0x80));
  EXPECT_TRUE(Float8E4M3FN(1.0f) == Float8E4M3FN::from_bits(0x38));
}

// Every code's value converts back to the same code, every midpoint between two neighbouring
// finite codes rounds to the even one, and the doubles just beside a midpoint round away from it.
template <class T>
void check_exhaustive(int num_codes) {
  int failures = 0;
  for (int c = 0; c < num_codes && failures < 10; ++c) {
    const auto bits = static_cast<uint8_t>(c);
    const T t = T::from_bits(bits);
    const double v = static_cast<float>(t);
    if (t.is_nan()) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    if (std::isinf(v)) continue;
    if (encode<T>(v) != bits) {
      ADD_FAILURE() << "code 0x" << std::hex << c << " -> " << v << " -> 0x" << +encode<T>(v);
      ++failures;
    }
    const auto next = static_cast<uint8_t>(c + 1);
    const int sign_bit = num_codes / 2;
    if ((next & (sign_bit - 1)) == 0) continue;  // c is the largest magnitude code
    const T tn = T::from_bits(next);
    if (tn.is_nan() || std::isinf(static_cast<float>(tn))) continue;
    const double mid = (v + static_cast<float>(tn)) / 2;
    const uint8_t even = (c & 1) == 0 ? bits : next;
    const uint8_t got = encode<T>(mid);
    if (got != even) {
      ADD_FAILURE() << "midpoint above 0x" << std::hex << c << " -> 0x" << +got;
      ++failures;
    }
    const double away = std::nextafter(mid, (c & sign_bit) ? -kInf : kInf);
    const double toward = std::nextafter(mid, 0.0);
    if (encode<T>(away) != next || encode<T>(toward) != bits) {
      ADD_FAILURE() << "neighbours of the midpoint above 0x" << std::hex << c;
      ++failures;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Float8, ExhaustiveE4M3FN) {
  check_exhaustive<Float8E4M3FN>(256);
}
TEST(Float8, ExhaustiveE4M3FNUZ) {
  check_exhaustive<Float8E4M3FNUZ>(256);
}
TEST(Float8, ExhaustiveE5M2) {
  check_exhaustive<Float8E5M2>(256);
}
TEST(Float8, ExhaustiveE5M2FNUZ) {
  check_exhaustive<Float8E5M2FNUZ>(256);
}
TEST(Float8, ExhaustiveE2M1) {
  check_exhaustive<Float4E2M1>(16);
}

TEST(Float8, E8M0RoundTripsEveryCode) {
  for (int c = 0; c < 255; ++c) {
    const float v = decode<Float8E8M0>(static_cast<uint8_t>(c));
    for (E8M0Rounding r : {E8M0Rounding::kUp, E8M0Rounding::kDown, E8M0Rounding::kNearest}) {
      EXPECT_EQ(detail::float8e8m0_from_float(v, true, r), c) << c;
      EXPECT_EQ(detail::float8e8m0_from_float(v, false, r), c) << c;
    }
  }
}

// test_cast_e8m0_FLOAT_to_FLOAT8E8M0 (saturate, round up) and ONNX's table of special values.
TEST(Float8, E8M0Conversions) {
  const float in[] = {0.0f, 0.124f, 0.25f, 0.5f, 1.1f, 2.0f, 4.0f, 8.0f};
  const int expected[] = {0x0, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x81, 0x82};
  for (size_t i = 0; i < std::size(in); ++i) EXPECT_EQ(encode<Float8E8M0>(in[i]), expected[i]);
  using detail::float8e8m0_from_float;
  constexpr auto kUp = E8M0Rounding::kUp;
  constexpr auto kDown = E8M0Rounding::kDown;
  constexpr auto kNearest = E8M0Rounding::kNearest;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float8e8m0_from_float(nan, true, kUp), 0xff);
  EXPECT_EQ(float8e8m0_from_float(inf, true, kUp), 0xfe);
  EXPECT_EQ(float8e8m0_from_float(inf, false, kNearest), 0xff);
  EXPECT_EQ(float8e8m0_from_float(0.0f, false, kNearest), 0xff);
  EXPECT_EQ(float8e8m0_from_float(std::ldexp(1.0f, -130), true, kUp), 0x00);
  EXPECT_EQ(float8e8m0_from_float(std::ldexp(1.0f, -130), false, kNearest), 0xff);
  // A float subnormal between 2^-127 and 2^-126 rounds like any other value.
  EXPECT_EQ(float8e8m0_from_float(std::ldexp(1.5f, -127), true, kUp), 0x01);
  EXPECT_EQ(float8e8m0_from_float(std::ldexp(1.5f, -127), true, kDown), 0x00);
  EXPECT_EQ(float8e8m0_from_float(std::ldexp(1.5f, -127), true, kNearest), 0x01);
  // 1.5 * 2^e is the tie: nearest rounds it up; just below rounds down.
  EXPECT_EQ(float8e8m0_from_float(1.5f, true, kNearest), 0x80);
  EXPECT_EQ(float8e8m0_from_float(std::nextafter(1.5f, 0.0f), true, kNearest), 0x7f);
  EXPECT_EQ(float8e8m0_from_float(1.9f, true, kDown), 0x7f);
  EXPECT_EQ(float8e8m0_from_float(1.01f, true, kUp), 0x80);
  // Past 2^127 after rounding: saturate at 2^127, else NaN.
  const float big = std::ldexp(1.5f, 127);
  EXPECT_EQ(float8e8m0_from_float(big, true, kUp), 0xfe);
  EXPECT_EQ(float8e8m0_from_float(big, false, kUp), 0xff);
  EXPECT_EQ(float8e8m0_from_float(big, false, kDown), 0xfe);
  // The sign is ignored (ONNX leaves negative inputs unspecified).
  EXPECT_EQ(float8e8m0_from_float(-2.0f, true, kUp), 0x80);
}

}  // namespace
}  // namespace kiln
