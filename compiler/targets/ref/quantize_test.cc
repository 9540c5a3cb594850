// SPDX-License-Identifier: Apache-2.0
// Tests of QuantizeLinear and DequantizeLinear on the ref target at opset 25: blocked scales, the
// 16-, 4- and 2-bit and float8 outputs, saturate, output_dtype, precision and e8m0 scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

Tensor tensor_of(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string> && !std::is_same_v<T, bool>) {
      T* p = t.data<T>();
      for (size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_arithmetic_v<T>) {
          p[i] = static_cast<T>(values[i]);
        } else {
          p[i] = T(static_cast<float>(values[i]));
        }
      }
    }
  });
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_arithmetic_v<T>) {
          out.push_back(static_cast<double>(t.data<T>()[i]));
        } else {
          out.push_back(static_cast<double>(static_cast<float>(t.data<T>()[i])));
        }
      }
    }
  });
  return out;
}

// ONNX's test_quantizelinear_blocked_asymmetric: scales per block of 2 along axis 1.
TEST(QuantizeRef, BlockedScalesAndZeroPoints) {
  const Tensor x = tensor_of(DType::kF32, Shape{3, 4}, {6, 12, 50, 5, 1, 8, 4, 5, 0, 20, 10, 4});
  const Tensor scale = tensor_of(DType::kF32, Shape{3, 2}, {1.5, 2.5, 3, 4.9, 5.1, 6.9});
  const Tensor zp = tensor_of(DType::kU8, Shape{3, 2}, {0, 1, 1, 0, 2, 3});
  ops::QuantizeLinear q;
  q.axis = 1;
  q.block_size = 2;
  Result<Tensor> y = run_one(q, {x, scale, zp});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kU8);
  EXPECT_EQ(values_of(*y), (std::vector<double>{4, 8, 21, 3, 1, 4, 1, 1, 2, 6, 4, 4}));
  ops::DequantizeLinear dq;
  dq.axis = 1;
  dq.block_size = 2;
  Result<Tensor> back = run_one(dq, {*y, scale, zp});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const std::vector<double> want = {6, 12, 50, 5, 0, 9, 4.9f, 4.9f, 0, 20.4f, 6.9f, 6.9f};
  const std::vector<double> got = values_of(*back);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

// A last block shorter than block_size (5 = 2 + 2 + 1), along axis 0 of a 3-D tensor.
TEST(QuantizeRef, BlockedWithAShortLastBlock) {
  std::vector<double> xs(5 * 2 * 1);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i);
  const Tensor x = tensor_of(DType::kF32, Shape{5, 2, 1}, xs);
  const Tensor scale = tensor_of(DType::kF32, Shape{3, 2, 1}, {1, 2, 4, 8, 16, 32});
  ops::QuantizeLinear q;
  q.axis = 0;
  q.block_size = 2;
  q.output_dtype = DType::kI16;
  Result<Tensor> y = run_one(q, {x, scale});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kI16);
  // Rows 0-1 use scales {1, 2}, rows 2-3 {4, 8}, row 4 {16, 32}; halves round to even.
  EXPECT_EQ(values_of(*y), (std::vector<double>{0, 0, 2, 2, 1, 1, 2, 1, 0, 0}));
}

TEST(QuantizeInfer, BlockedScalesMustFit) {
  const Tensor x = tensor_of(DType::kF32, Shape{3, 4}, std::vector<double>(12, 0));
  ops::QuantizeLinear q;
  q.axis = 1;
  q.block_size = 3;  // ceil(4 / 3) = 2 blocks: a [3, 2] scale fits, [3, 1] does not
  Result<Tensor> ok = run_one(q, {x, tensor_of(DType::kF32, Shape{3, 2}, {1, 1, 1, 1, 1, 1})});
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
  Result<Tensor> bad = run_one(q, {x, tensor_of(DType::kF32, Shape{3, 1}, {1, 1, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("in blocks of 3 along axis 1: dim 1 must be 2"),
            std::string::npos)
      << bad.status().message();
  q.block_size = 0;
  Result<Tensor> unblocked =
      run_one(q, {x, tensor_of(DType::kF32, Shape{3, 2}, {1, 1, 1, 1, 1, 1})});
  ASSERT_FALSE(unblocked.ok());
  EXPECT_NE(unblocked.status().message().find("must be a scalar or 1-D (or give block_size)"),
            std::string::npos)
      << unblocked.status().message();
}

TEST(QuantizeRef, NarrowIntegersSaturate) {
  const Tensor x = tensor_of(DType::kF32, Shape{6}, {-9, -2.5, 0.5, 1.5, 7.6, 100});
  const Tensor scale = tensor_of(DType::kF32, Shape{}, {1});
  Result<Tensor> i4 =
      run_one(ops::QuantizeLinear{}, {x, scale, tensor_of(DType::kI4, Shape{}, {0})});
  ASSERT_TRUE(i4.ok()) << i4.status().to_string();
  EXPECT_EQ(values_of(*i4), (std::vector<double>{-8, -2, 0, 2, 7, 7}));
  Result<Tensor> u2 =
      run_one(ops::QuantizeLinear{}, {x, scale, tensor_of(DType::kU2, Shape{}, {1})});
  ASSERT_TRUE(u2.ok()) << u2.status().to_string();
  EXPECT_EQ(values_of(*u2), (std::vector<double>{0, 0, 1, 3, 3, 3}));
  ops::DequantizeLinear dq;
  Result<Tensor> back = run_one(dq, {*u2, scale, tensor_of(DType::kU2, Shape{}, {1})});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(values_of(*back), (std::vector<double>{-1, -1, 0, 2, 2, 2}));
}

TEST(QuantizeRef, Float8OutputsFollowSaturate) {
  const Tensor x = tensor_of(DType::kF32, Shape{4}, {1, 1000, -1e6, 0.01});
  const Tensor scale = tensor_of(DType::kF32, Shape{}, {2});
  const Tensor zp = tensor_of(DType::kF8E4M3FN, Shape{}, {0});
  Result<Tensor> sat = run_one(ops::QuantizeLinear{}, {x, scale, zp});
  ASSERT_TRUE(sat.ok()) << sat.status().to_string();
  // 0.005 is 2.56 subnormal quanta (2^-9) of e4m3fn: 3 of them.
  EXPECT_EQ(values_of(*sat), (std::vector<double>{0.5, 448, -448, 0.005859375}));
  ops::QuantizeLinear q;
  q.saturate = 0;
  Result<Tensor> unsat = run_one(q, {x, scale, zp});
  ASSERT_TRUE(unsat.ok());
  const std::vector<double> v = values_of(*unsat);
  EXPECT_EQ(v[0], 0.5);
  EXPECT_TRUE(std::isnan(v[1]) && std::isnan(v[2]));
  // float4 always saturates.
  const Tensor f4zp = tensor_of(DType::kF4E2M1, Shape{}, {0});
  Result<Tensor> f4 = run_one(q, {x, scale, f4zp});
  ASSERT_TRUE(f4.ok()) << f4.status().to_string();
  EXPECT_EQ(values_of(*f4), (std::vector<double>{0.5, 6, -6, 0}));
}

TEST(QuantizeRef, PrecisionRoundsTheDivision) {
  // 2049 is not a half: divided in f16 it is 2048; in f32 (the scale's type) it stays 2049.
  const Tensor x = tensor_of(DType::kF32, Shape{1}, {2049});
  const Tensor scale = tensor_of(DType::kF32, Shape{}, {1});
  const Tensor zp = tensor_of(DType::kI16, Shape{}, {0});
  Result<Tensor> f32 = run_one(ops::QuantizeLinear{}, {x, scale, zp});
  ops::QuantizeLinear q;
  q.precision = DType::kF16;
  Result<Tensor> f16 = run_one(q, {x, scale, zp});
  ASSERT_TRUE(f32.ok() && f16.ok()) << f16.status().to_string();
  EXPECT_EQ(values_of(*f32)[0], 2049);
  EXPECT_EQ(values_of(*f16)[0], 2048);
}

TEST(QuantizeInfer, OutputDtype) {
  const Tensor x = tensor_of(DType::kF32, Shape{2}, {1, 2});
  const Tensor scale = tensor_of(DType::kF32, Shape{}, {1});
  ops::QuantizeLinear q;
  q.output_dtype = DType::kI4;
  Result<Tensor> y = run_one(q, {x, scale});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kI4);
  Result<Tensor> mismatch = run_one(q, {x, scale, tensor_of(DType::kU8, Shape{}, {0})});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(
      mismatch.status().message().find("output_dtype i4 differs from the zero point's type u8"),
      std::string::npos)
      << mismatch.status().message();
  q.output_dtype = DType::kF32;
  Result<Tensor> not_quantized = run_one(q, {x, scale});
  ASSERT_FALSE(not_quantized.ok());
  EXPECT_NE(not_quantized.status().message().find("output_dtype must be"), std::string::npos);
}

TEST(DequantizeRef, E8M0ScaleAndOutputDtype) {
  const Tensor x = tensor_of(DType::kI8, Shape{3}, {1, -2, 100});
  const Tensor scale = tensor_of(DType::kF8E8M0, Shape{}, {0.5});
  ops::DequantizeLinear dq;
  Result<Tensor> no_dtype = run_one(dq, {x, scale});
  ASSERT_FALSE(no_dtype.ok());
  EXPECT_NE(no_dtype.status().message().find("give output_dtype"), std::string::npos)
      << no_dtype.status().message();
  dq.output_dtype = DType::kF16;
  Result<Tensor> y = run_one(dq, {x, scale});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kF16);
  EXPECT_EQ(values_of(*y), (std::vector<double>{0.5, -1, 50}));
}

TEST(DequantizeRef, Float8AndInt16Inputs) {
  const Tensor f8 = tensor_of(DType::kF8E5M2, Shape{3}, {0.5, -3, 57344});
  const Tensor scale = tensor_of(DType::kF16, Shape{}, {2});
  Result<Tensor> y = run_one(ops::DequantizeLinear{}, {f8, scale});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kF16);  // the scale's type
  const std::vector<double> v = values_of(*y);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -6);
  EXPECT_TRUE(std::isinf(v[2]));  // 114688 is past f16's range
  const Tensor i16 = tensor_of(DType::kI16, Shape{2}, {-32768, 32767});
  Result<Tensor> z = run_one(ops::DequantizeLinear{}, {i16, tensor_of(DType::kF32, Shape{}, {1}),
                                                       tensor_of(DType::kI16, Shape{}, {-1})});
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  EXPECT_EQ(values_of(*z), (std::vector<double>{-32767, 32768}));
}

}  // namespace
}  // namespace kiln::compiler
