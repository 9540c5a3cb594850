// SPDX-License-Identifier: Apache-2.0
// Tests of TensorProto decoding and encoding: the narrow types' codes, ONNX's packing of the 4-
// and 2-bit types (raw_data and int32_data) and the errors for data of the wrong size.
#include "compiler/onnx/tensor_proto.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::compiler {
namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

onnx::TensorProto raw_proto(int32_t type, std::vector<int64_t> dims, std::vector<uint8_t> raw) {
  onnx::TensorProto p;
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  p.set_raw_data(std::string(raw.begin(), raw.end()));
  return p;
}

TEST(TensorProto, NarrowTypeCodes) {
  const std::pair<int32_t, DType> codes[] = {{17, DType::kF8E4M3FN}, {18, DType::kF8E4M3FNUZ},
                                             {19, DType::kF8E5M2},   {20, DType::kF8E5M2FNUZ},
                                             {21, DType::kU4},       {22, DType::kI4},
                                             {23, DType::kF4E2M1},   {24, DType::kF8E8M0},
                                             {25, DType::kU2},       {26, DType::kI2}};
  for (const auto& [code, dtype] : codes) {
    EXPECT_EQ(dtype_from_onnx(code), dtype) << code;
    EXPECT_EQ(dtype_to_onnx(dtype), code) << dtype_name(dtype);
  }
  EXPECT_EQ(dtype_from_onnx(14), std::nullopt);  // complex64
  EXPECT_EQ(dtype_from_onnx(27), std::nullopt);
}

// ONNX's test_cast_INT4_to_FLOAT input: 25 int4 values -9..15 wrapped, two to a byte, the first
// in the low nibble; the last byte's high nibble is padding.
TEST(TensorProto, UnpacksInt4FromRawData) {
  const std::vector<uint8_t> raw = {0x87, 0xa9, 0xcb, 0xed, 0x0f, 0x21, 0x43,
                                    0x65, 0x87, 0xa9, 0xcb, 0xed, 0x0f};
  Result<Tensor> t = tensor_from_proto(raw_proto(22, {5, 5}, raw), "", "x");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->dtype(), DType::kI4);
  ASSERT_EQ(t->nbytes(), 25u);  // one element per byte
  for (int64_t i = 0; i < 25; ++i) {
    EXPECT_EQ(t->data<Int4>()[i].value(), Int4::wrap(i - 9).value()) << i;
  }
  // The same bytes as uint4: the nibbles as they are.
  Result<Tensor> u = tensor_from_proto(raw_proto(21, {25}, raw), "", "x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->data<UInt4>()[0].value(), 7);
  EXPECT_EQ(u->data<UInt4>()[1].value(), 8);
  EXPECT_EQ(u->data<UInt4>()[24].value(), 15);
}

// test_cast_INT2_to_INT8: -3..3 wrapped to int2, four to a byte.
TEST(TensorProto, UnpacksInt2FromRawData) {
  Result<Tensor> t = tensor_from_proto(raw_proto(26, {7, 1}, {0x39, 0x39}), "", "x");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const int expected[] = {1, -2, -1, 0, 1, -2, -1};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(t->data<Int2>()[i].value(), expected[i]) << i;
}

// int32_data holds the packed bytes, one per value (test_quantizelinear_uint4's zero point).
TEST(TensorProto, UnpacksFourBitTypesFromInt32Data) {
  onnx::TensorProto p;
  p.set_data_type(21);
  p.add_dims(3);
  p.add_int32_data(0x11);
  p.add_int32_data(0x01);
  Result<Tensor> t = tensor_from_proto(p, "", "zp");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(bytes_of(*t), (std::vector<uint8_t>{1, 1, 1}));
  // Three values need two packed bytes, not three.
  p.add_int32_data(0x01);
  Result<Tensor> bad = tensor_from_proto(p, "", "zp");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "zp: holds 3 values but [3] of u4 packs into 2 (2 per value)");
}

TEST(TensorProto, Float8FromInt32DataAndRawData) {
  onnx::TensorProto p;
  p.set_data_type(17);
  p.add_dims(2);
  p.add_int32_data(0x38);
  p.add_int32_data(0xfe);
  Result<Tensor> t = tensor_from_proto(p, "", "x");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(static_cast<float>(t->data<Float8E4M3FN>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(t->data<Float8E4M3FN>()[1]), -448.0f);
  Result<Tensor> r = tensor_from_proto(raw_proto(19, {2}, {0x3c, 0x7c}), "", "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<float>(r->data<Float8E5M2>()[0]), 1.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(r->data<Float8E5M2>()[1])));
}

TEST(TensorProto, PackedRawDataOfTheWrongSizeIsAnError) {
  // 5 int4 values pack into 3 bytes; 5 bytes (one per value) is what an unpacked writer gives.
  Result<Tensor> t = tensor_from_proto(raw_proto(22, {5}, {1, 2, 3, 4, 5}), "", "w");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "w: has 5 bytes of data but [5] of i4 needs 3");
  Result<Tensor> u2 = tensor_from_proto(raw_proto(25, {9}, {0, 0}), "", "w");
  ASSERT_FALSE(u2.ok());
  EXPECT_EQ(u2.status().message(), "w: has 2 bytes of data but [9] of u2 needs 3");
}

// Found by fuzz_onnx_import: an initializer whose dims declare far more than its data holds
// was allocated first (12 GB there) and checked after. Now the check comes first: 2^39 floats
// (2 TiB, more than any machine here gives) over four bytes are refused by size, not by memory.
TEST(TensorProto, DataSizeIsCheckedBeforeTheDeclaredShapeIsAllocated) {
  Result<Tensor> raw =
      tensor_from_proto(raw_proto(1, {1 << 20, 1 << 19}, {0, 0, 128, 63}), "", "w");
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(raw.status().message(),
            "w: has 4 bytes of data but [1048576,524288] of f32 needs 2199023255552");
  onnx::TensorProto typed;
  typed.set_data_type(1);
  typed.add_dims(1 << 20);
  typed.add_dims(1 << 19);
  typed.add_float_data(1.0f);
  Result<Tensor> values = tensor_from_proto(typed, "", "w");
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().message(),
            "w: holds 1 values but its shape [1048576,524288] needs 549755813888");
}

TEST(TensorProto, EncodingPacksAndDecodingUnpacks) {
  for (DType d : {DType::kI4, DType::kU4, DType::kF4E2M1, DType::kI2, DType::kU2}) {
    SCOPED_TRACE(dtype_name(d));
    const int bits = dtype_bits(d);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 9}) {
      Tensor t(d, Shape{n});
      auto* p = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 7 + 3) & ((1 << bits) - 1));
      onnx::TensorProto proto;
      tensor_to_proto(t, &proto);
      EXPECT_EQ(proto.data_type(), dtype_to_onnx(d));
      const int64_t per_byte = 8 / bits;
      EXPECT_EQ(static_cast<int64_t>(proto.raw_data().size()), (n + per_byte - 1) / per_byte);
      Result<Tensor> back = tensor_from_proto(proto, "", "t");
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_EQ(bytes_of(*back), bytes_of(t)) << n;
    }
  }
  // Float8 stays one byte per value.
  Tensor f8(DType::kF8E5M2FNUZ, Shape{3});
  onnx::TensorProto proto;
  tensor_to_proto(f8, &proto);
  EXPECT_EQ(proto.data_type(), 20);
  EXPECT_EQ(proto.raw_data().size(), 3u);
}

TEST(TensorProto, PackNarrowLayout) {
  const uint8_t nibbles[] = {0x1, 0x2, 0x3};
  EXPECT_EQ(pack_narrow(nibbles, 3, 2), std::string("\x21\x03", 2));
  const uint8_t pairs[] = {1, 2, 3, 0, 1};
  EXPECT_EQ(pack_narrow(pairs, 5, 4), std::string("\x39\x01", 2));
  // Stray high bits of an element do not leak into its neighbours.
  const uint8_t stray[] = {0xf1, 0xf2};
  EXPECT_EQ(pack_narrow(stray, 2, 2), std::string("\x21", 1));
  uint8_t out[5] = {};
  unpack_narrow(reinterpret_cast<const uint8_t*>("\x39\x01"), 5, 4, out);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 5), (std::vector<uint8_t>{1, 2, 3, 0, 1}));
}

}  // namespace
}  // namespace kiln::compiler
