// SPDX-License-Identifier: Apache-2.0
// Tests of Cast, CastLike and BitCast on the ref target with ONNX's narrow types (float8, float4,
// e8m0, int4, int2): every pair of types, saturation, rounding, wrapping and special values; and
// that arithmetic refuses the narrow types while data movement carries them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"
#include "compiler/targets/ref/run_one_testing.h"

namespace kiln::compiler {
namespace {

using test::run_one;

// A tensor of `dtype` holding `values`, each built with the element type's own constructor.
Tensor tensor_of(DType dtype, const std::vector<double>& values) {
  Tensor t(dtype, Shape{static_cast<int64_t>(values.size())});
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      T* p = t.data<T>();
      for (size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_same_v<T, bool>) {
          p[i] = values[i] != 0;
        } else if constexpr (std::is_arithmetic_v<T>) {
          p[i] = static_cast<T>(values[i]);
        } else {
          p[i] = T(static_cast<float>(values[i]));
        }
      }
    }
  });
  return t;
}

double value_at(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&]<class T>() -> double {
    if constexpr (std::is_same_v<T, std::string>) {
      return std::strtod(t.data<T>()[i].c_str(), nullptr);
    } else if constexpr (std::is_arithmetic_v<T>) {
      return static_cast<double>(t.data<T>()[i]);
    } else {
      return static_cast<double>(static_cast<float>(t.data<T>()[i]));
    }
  });
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

ops::Cast cast_to(DType to, int64_t saturate = 1, std::string round_mode = "up") {
  ops::Cast c;
  c.to = to;
  c.saturate = saturate;
  c.round_mode = std::move(round_mode);
  return c;
}

// Whether `v` is a value of `dtype`.
bool holds(DType dtype, double v) {
  const bool integral = v == std::floor(v);
  switch (dtype) {
    case DType::kBool: return v == 0 || v == 1;
    case DType::kF8E8M0: return v > 0 && std::exp2(std::round(std::log2(v))) == v;
    case DType::kU4: return integral && v >= 0 && v <= 15;
    case DType::kI4: return integral && v >= -8 && v <= 7;
    case DType::kU2: return integral && v >= 0 && v <= 3;
    case DType::kI2: return integral && v >= -2 && v <= 1;
    default: break;
  }
  if (dtype_is_float(dtype) || dtype_is_narrow_float(dtype)) return true;  // the values below
  return integral && (dtype_is_signed(dtype) || v >= 0);
}

// Every pair of non-string types carries every value both hold, unchanged.
TEST(CastRef, EveryPairOfTypesKeepsTheValuesBothHold) {
  const std::vector<double> samples = {0, 1, 2, 3, -1, -2, 0.5, 4, -6};
  int pairs = 0;
  for (int f = 0; f < kNumDTypes; ++f) {
    for (int t = 0; t < kNumDTypes; ++t) {
      const auto from = static_cast<DType>(f);
      const auto to = static_cast<DType>(t);
      if (from == DType::kString || to == DType::kString) continue;
      std::vector<double> vs;
      for (double v : samples) {
        if (holds(from, v) && holds(to, v)) vs.push_back(v);
      }
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Result<Tensor> y = run_one(cast_to(to), {tensor_of(from, vs)});
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      ASSERT_EQ(y->dtype(), to);
      for (size_t i = 0; i < vs.size(); ++i) {
        EXPECT_EQ(value_at(*y, static_cast<int64_t>(i)), vs[i]);
      }
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 23 * 23);
}

TEST(CastRef, SaturateDecidesWhatOutOfRangeBecomes) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector<float>({1e6f, inf, -inf, NAN, -1e6f});
  Result<Tensor> sat = run_one(cast_to(DType::kF8E4M3FN, 1), {x});
  Result<Tensor> unsat = run_one(cast_to(DType::kF8E4M3FN, 0), {x});
  ASSERT_TRUE(sat.ok() && unsat.ok());
  EXPECT_EQ(bytes_of(*sat), (std::vector<uint8_t>{0x7e, 0x7e, 0xfe, 0x7f, 0xfe}));
  EXPECT_EQ(bytes_of(*unsat), (std::vector<uint8_t>{0x7f, 0x7f, 0xff, 0x7f, 0xff}));
  Result<Tensor> e5m2 = run_one(cast_to(DType::kF8E5M2, 0), {x});
  ASSERT_TRUE(e5m2.ok());
  EXPECT_EQ(bytes_of(*e5m2), (std::vector<uint8_t>{0x7c, 0x7c, 0xfc, 0x7e, 0xfc}));
  Result<Tensor> fnuz = run_one(cast_to(DType::kF8E5M2FNUZ, 0), {x});
  ASSERT_TRUE(fnuz.ok());
  EXPECT_EQ(bytes_of(*fnuz), (std::vector<uint8_t>{0x80, 0x80, 0x80, 0x80, 0x80}));
  // float4 has no inf or NaN to overflow to: it saturates either way.
  Result<Tensor> f4 = run_one(cast_to(DType::kF4E2M1, 0), {x});
  ASSERT_TRUE(f4.ok());
  EXPECT_EQ(bytes_of(*f4), (std::vector<uint8_t>{0x7, 0x7, 0xf, 0x8, 0xf}));
  // Between the narrow types too: e5m2's 57344 is past e4m3fn's 448.
  const Tensor big = tensor_of(DType::kF8E5M2, {57344});
  Result<Tensor> narrowed = run_one(cast_to(DType::kF8E4M3FN, 1), {big});
  Result<Tensor> nan = run_one(cast_to(DType::kF8E4M3FN, 0), {big});
  ASSERT_TRUE(narrowed.ok() && nan.ok());
  EXPECT_EQ(value_at(*narrowed, 0), 448.0);
  EXPECT_TRUE(std::isnan(value_at(*nan, 0)));
}

TEST(CastRef, DoubleToFloat8RoundsOnce) {
  // 1 + 2^-4 is the tie between 1 and 1.125 in e4m3fn; the 2^-40 above it is lost in a float,
  // which would round the tie to even (1.0).
  const double x = 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40);
  Result<Tensor> y = run_one(cast_to(DType::kF8E4M3FN), {Tensor::from_vector<double>({x})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(value_at(*y, 0), 1.125);
}

TEST(CastRef, FourAndTwoBitIntegersTruncateAndWrap) {
  // As ONNX's test_cast_FLOAT_to_INT4 and test_cast_FLOAT_to_UINT2: the low bits of the integer.
  const Tensor f = Tensor::from_vector<float>({-9.0f, 8.0f, 15.0f, 2.9f, -2.9f, NAN});
  Result<Tensor> i4 = run_one(cast_to(DType::kI4), {f});
  ASSERT_TRUE(i4.ok()) << i4.status().to_string();
  const std::vector<double> want_i4 = {7, -8, -1, 2, -2, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(value_at(*i4, i), want_i4[static_cast<size_t>(i)]) << i;
  const Tensor ints = Tensor::from_vector<int32_t>({7, 8, -9, 300, -1});
  Result<Tensor> u2 = run_one(cast_to(DType::kU2), {ints});
  ASSERT_TRUE(u2.ok());
  const std::vector<double> want_u2 = {3, 0, 3, 0, 3};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(value_at(*u2, i), want_u2[static_cast<size_t>(i)]) << i;
  // Stored as the low bits only (what ONNX packs).
  EXPECT_EQ(bytes_of(*i4)[0], 0x07);
  EXPECT_EQ(bytes_of(*i4)[2], 0x0f);
  // Narrow floats to integers truncate (saturating at the type's range, NaN to 0).
  const Tensor f8 = tensor_of(DType::kF8E4M3FN, {3.5, -3.5, 448, NAN});
  Result<Tensor> i8 = run_one(cast_to(DType::kI8), {f8});
  ASSERT_TRUE(i8.ok());
  EXPECT_EQ(bytes_of(*i8), (std::vector<uint8_t>{3, 0xfd, 127, 0}));
}

TEST(CastRef, E8M0FollowsRoundMode) {
  const Tensor x = Tensor::from_vector<float>({1.5f, 3.0f, 0.7f, 0.0f, 1.0f});
  Result<Tensor> up = run_one(cast_to(DType::kF8E8M0, 1, "up"), {x});
  Result<Tensor> down = run_one(cast_to(DType::kF8E8M0, 1, "down"), {x});
  Result<Tensor> nearest = run_one(cast_to(DType::kF8E8M0, 0, "nearest"), {x});
  ASSERT_TRUE(up.ok() && down.ok() && nearest.ok());
  EXPECT_EQ(bytes_of(*up), (std::vector<uint8_t>{0x80, 0x81, 0x7f, 0x00, 0x7f}));
  EXPECT_EQ(bytes_of(*down), (std::vector<uint8_t>{0x7f, 0x80, 0x7e, 0x00, 0x7f}));
  EXPECT_EQ(bytes_of(*nearest), (std::vector<uint8_t>{0x80, 0x81, 0x7e, 0xff, 0x7f}));
  Result<Tensor> bad = run_one(cast_to(DType::kF8E8M0, 1, "sideways"), {x});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("round_mode must be up, down or nearest, got \"sideways\""),
            std::string::npos)
      << bad.status().message();
}

TEST(CastRef, StringsAndBools) {
  const Tensor s = Tensor::from_vector<std::string>({"2.5", "-3", "1e9"});
  Result<Tensor> f8 = run_one(cast_to(DType::kF8E4M3FN), {s});
  ASSERT_TRUE(f8.ok()) << f8.status().to_string();
  EXPECT_EQ(value_at(*f8, 0), 2.5);
  EXPECT_EQ(value_at(*f8, 1), -3);
  EXPECT_EQ(value_at(*f8, 2), 448);
  Result<Tensor> text = run_one(cast_to(DType::kString), {tensor_of(DType::kI4, {-3, 7})});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->data<std::string>()[0], "-3");
  EXPECT_EQ(text->data<std::string>()[1], "7");
  Result<Tensor> half = run_one(cast_to(DType::kString), {tensor_of(DType::kF4E2M1, {0.5})});
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->data<std::string>()[0], "0.5");
  Result<Tensor> b = run_one(cast_to(DType::kBool), {tensor_of(DType::kF8E5M2, {0.5, 0, -0.0})});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(bytes_of(*b), (std::vector<uint8_t>{1, 0, 0}));
}

TEST(CastRef, CastLikeTakesSaturate) {
  ops::CastLike like;
  like.saturate = 0;
  Result<Tensor> y =
      run_one(like, {Tensor::from_vector<float>({1e6f}), tensor_of(DType::kF8E4M3FNUZ, {1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(bytes_of(*y), std::vector<uint8_t>{0x80});
}

TEST(CastInfer, ChecksSaturateAndRoundMode) {
  Result<Tensor> y = run_one(cast_to(DType::kF8E4M3FN, 2), {Tensor::from_vector<float>({1})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("attribute saturate must be 0 or 1, got 2"),
            std::string::npos)
      << y.status().message();
}

TEST(BitCastRef, KeepsTheBits) {
  ops::BitCast to_i32;
  to_i32.to = DType::kI32;
  Result<Tensor> y = run_one(to_i32, {Tensor::from_vector<float>({1.0f, -2.0f})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->data<int32_t>()[0], 0x3f800000);
  EXPECT_EQ(y->data<int32_t>()[1], static_cast<int32_t>(0xc0000000u));
  // The narrow types: f8 as u8, i4 as u4 (and back), f4 as i4.
  ops::BitCast to_u8;
  to_u8.to = DType::kU8;
  Result<Tensor> f8 = run_one(to_u8, {tensor_of(DType::kF8E4M3FN, {1, -448})});
  ASSERT_TRUE(f8.ok());
  EXPECT_EQ(bytes_of(*f8), (std::vector<uint8_t>{0x38, 0xfe}));
  ops::BitCast to_u4;
  to_u4.to = DType::kU4;
  Result<Tensor> u4 = run_one(to_u4, {tensor_of(DType::kI4, {-1, -8, 7})});
  ASSERT_TRUE(u4.ok());
  EXPECT_EQ(value_at(*u4, 0), 15);
  EXPECT_EQ(value_at(*u4, 1), 8);
  EXPECT_EQ(value_at(*u4, 2), 7);
  ops::BitCast to_i4;
  to_i4.to = DType::kI4;
  Result<Tensor> f4 = run_one(to_i4, {tensor_of(DType::kF4E2M1, {-0.5, 6})});
  ASSERT_TRUE(f4.ok());
  EXPECT_EQ(value_at(*f4, 0), -7);  // 0b1001
  EXPECT_EQ(value_at(*f4, 1), 7);   // 0b0111
  // u8 to bool keeps bools 0 or 1.
  ops::BitCast to_bool;
  to_bool.to = DType::kBool;
  Result<Tensor> b = run_one(to_bool, {Tensor::from_vector<uint8_t>({0, 1, 2})});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(bytes_of(*b), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(BitCastInfer, RefusesOtherWidthsAndStrings) {
  ops::BitCast to_i16;
  to_i16.to = DType::kI16;
  Result<Tensor> y = run_one(to_i16, {Tensor::from_vector<float>({1.0f})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("cannot reinterpret f32 (32 bits) as i16 (16 bits)"),
            std::string::npos)
      << y.status().message();
  ops::BitCast u8_to_u4;
  u8_to_u4.to = DType::kU4;
  EXPECT_FALSE(run_one(u8_to_u4, {Tensor::from_vector<uint8_t>({1})}).ok());
  ops::BitCast to_string;
  to_string.to = DType::kString;
  Result<Tensor> s = run_one(to_string, {Tensor::from_vector<int64_t>({1})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("strings have no fixed bits"), std::string::npos);
}

TEST(NarrowTypes, ArithmeticRefusesThem) {
  const Tensor a = tensor_of(DType::kF8E4M3FN, {1, 2});
  Result<Tensor> sum = run_one(ops::Add{}, {a, a});
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("f8e4m3fn"), std::string::npos) << sum.status().message();
  Result<Tensor> abs = run_one(ops::Abs{}, {tensor_of(DType::kI4, {-1})});
  ASSERT_FALSE(abs.ok());
  EXPECT_NE(abs.status().message().find("i4"), std::string::npos) << abs.status().message();
}

TEST(NarrowTypes, DataMovementCarriesThem) {
  const Tensor x = tensor_of(DType::kI4, {1, -2, 3, -4, 5, -6});
  Tensor x23(DType::kI4, Shape{2, 3});
  const std::vector<uint8_t> xb = bytes_of(x);
  std::copy(xb.begin(), xb.end(), static_cast<uint8_t*>(x23.raw_data()));
  ops::Transpose t;
  Result<Tensor> tr = run_one(t, {x23});
  ASSERT_TRUE(tr.ok()) << tr.status().to_string();
  ASSERT_EQ(tr->shape(), (Shape{3, 2}));
  const std::vector<double> want_t = {1, -4, -2, 5, 3, -6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(value_at(*tr, i), want_t[static_cast<size_t>(i)]);
  ops::Concat c;
  c.axis = 0;
  const Tensor f8 = tensor_of(DType::kF8E5M2, {0.5, -2});
  Result<Tensor> cat = run_one(c, {f8, f8});
  ASSERT_TRUE(cat.ok()) << cat.status().to_string();
  EXPECT_EQ(bytes_of(*cat), (std::vector<uint8_t>{0x38, 0xc0, 0x38, 0xc0}));
  Result<Tensor> g = run_one(ops::Gather{}, {x, Tensor::from_vector<int64_t>({5, 0})});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(value_at(*g, 0), -6);
  EXPECT_EQ(value_at(*g, 1), 1);
  Result<Tensor> id = run_one(ops::Identity{}, {tensor_of(DType::kF8E8M0, {0.25})});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(value_at(*id, 0), 0.25);
  Result<Tensor> r = run_one(ops::Reshape{}, {x, Tensor::from_vector<int64_t>({3, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dtype(), DType::kI4);
  EXPECT_EQ(bytes_of(*r), bytes_of(x));
  Result<Tensor> sl = run_one(
      ops::Slice{}, {x, Tensor::from_vector<int64_t>({1}), Tensor::from_vector<int64_t>({3})});
  ASSERT_TRUE(sl.ok()) << sl.status().to_string();
  EXPECT_EQ(value_at(*sl, 0), -2);
  EXPECT_EQ(value_at(*sl, 1), 3);
}

}  // namespace
}  // namespace kiln::compiler
