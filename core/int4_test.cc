// SPDX-License-Identifier: Apache-2.0
// Tests for the 4- and 2-bit integer storage types: ranges, wrapping, saturation, stray high bits.
#include "core/int4.h"

#include <gtest/gtest.h>

#include <limits>

namespace kiln {
namespace {

TEST(SmallInt, Ranges) {
  EXPECT_EQ(Int4::kMin, -8);
  EXPECT_EQ(Int4::kMax, 7);
  EXPECT_EQ(UInt4::kMin, 0);
  EXPECT_EQ(UInt4::kMax, 15);
  EXPECT_EQ(Int2::kMin, -2);
  EXPECT_EQ(Int2::kMax, 1);
  EXPECT_EQ(UInt2::kMax, 3);
}

TEST(SmallInt, EveryCodeRoundTrips) {
  for (int v = Int4::kMin; v <= Int4::kMax; ++v) {
    EXPECT_EQ(Int4::wrap(v).value(), v);
    EXPECT_EQ(Int4::saturate(v).value(), v);
  }
  for (int v = 0; v <= 15; ++v) EXPECT_EQ(UInt4::wrap(v).value(), v);
  for (int v = -2; v <= 1; ++v) EXPECT_EQ(Int2::wrap(v).value(), v);
  for (int v = 0; v <= 3; ++v) EXPECT_EQ(UInt2::wrap(v).value(), v);
}

TEST(SmallInt, WrapKeepsTheLowBits) {
  // ONNX's test_cast_FLOAT_to_INT4: -9 -> 7, 8 -> -8, 15 -> -1; as uint4 -9 -> 7, -1 -> 15.
  EXPECT_EQ(Int4::wrap(-9).value(), 7);
  EXPECT_EQ(Int4::wrap(8).value(), -8);
  EXPECT_EQ(Int4::wrap(15).value(), -1);
  EXPECT_EQ(UInt4::wrap(-9).value(), 7);
  EXPECT_EQ(UInt4::wrap(-1).value(), 15);
  EXPECT_EQ(UInt4::wrap(16).value(), 0);
  // test_cast_FLOAT_to_INT2: -3 -> 1, 2 -> -2, 3 -> -1.
  EXPECT_EQ(Int2::wrap(-3).value(), 1);
  EXPECT_EQ(Int2::wrap(2).value(), -2);
  EXPECT_EQ(Int2::wrap(3).value(), -1);
  EXPECT_EQ(UInt2::wrap(-1).value(), 3);
  // The stored bits are the low bits only (what ONNX packs).
  EXPECT_EQ(Int4::wrap(-1).bits, 0x0f);
  EXPECT_EQ(Int2::wrap(-2).bits, 0x02);
  EXPECT_EQ(Int4::wrap(int64_t{1} << 40 | 5).value(), 5);
}

TEST(SmallInt, SaturateClamps) {
  EXPECT_EQ(Int4::saturate(-30).value(), -8);
  EXPECT_EQ(Int4::saturate(100).value(), 7);
  EXPECT_EQ(UInt4::saturate(-1).value(), 0);
  EXPECT_EQ(UInt4::saturate(16).value(), 15);
  EXPECT_EQ(Int2::saturate(-3).value(), -2);
  EXPECT_EQ(Int2::saturate(2).value(), 1);
  EXPECT_EQ(UInt2::saturate(9).value(), 3);
}

TEST(SmallInt, FromFloatTruncatesThenWraps) {
  EXPECT_EQ(Int4(-9.0f).value(), 7);
  EXPECT_EQ(Int4(2.9f).value(), 2);
  EXPECT_EQ(Int4(-2.9f).value(), -2);
  EXPECT_EQ(UInt4(15.5f).value(), 15);
  EXPECT_EQ(Int2(3.0f).value(), -1);
  EXPECT_EQ(Int4(std::numeric_limits<float>::quiet_NaN()).value(), 0);
  EXPECT_EQ(UInt4(std::numeric_limits<float>::infinity()).value(), 15);
  EXPECT_EQ(Int4(-std::numeric_limits<float>::infinity()).value(), 0);
}

TEST(SmallInt, StrayHighBitsAreIgnored) {
  // A byte from an artifact or a BitCast may carry high bits: they never change the value.
  EXPECT_EQ(Int4::from_bits(0xf7).value(), 7);
  EXPECT_EQ(Int4::from_bits(0x38).value(), -8);
  EXPECT_EQ(UInt2::from_bits(0xfd).value(), 1);
  Int4 a;
  a.bits = 0x1f;  // written directly, as a raw tensor byte would be
  EXPECT_EQ(a.value(), -1);
  EXPECT_TRUE(a == Int4::wrap(-1));
  EXPECT_EQ(static_cast<int>(Int2::wrap(-1)), -1);
}

}  // namespace
}  // namespace kiln
