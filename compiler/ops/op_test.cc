// SPDX-License-Identifier: Apache-2.0
// Tests of the op declarations: names, defaults, equality, hashing and printing from reflect().
#include "compiler/ops/op.h"

#include <gtest/gtest.h>

#include "compiler/ops/all_ops.h"

namespace kiln::compiler {
namespace {

TEST(Op, NamesRoundTripThroughTheList) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    auto kind = static_cast<OpKind>(k);
    std::optional<OpKind> parsed = parse_op_kind(op_kind_name(kind));
    ASSERT_TRUE(parsed.has_value()) << op_kind_name(kind);
    EXPECT_EQ(*parsed, kind);
    EXPECT_EQ(Op::make_default(kind).kind(), kind);
    EXPECT_FALSE(op_kind_family(kind).empty());
  }
  EXPECT_FALSE(parse_op_kind("NoSuchOp").has_value());
  EXPECT_EQ(op_kind_name(OpKind::kConv), "Conv");
  EXPECT_EQ(op_kind_family(OpKind::kConv), "nn");
}

TEST(Op, EqualityAndHashFollowAttributes) {
  ops::LeakyRelu a;
  a.alpha = 0.1f;
  ops::LeakyRelu b = a;
  ops::LeakyRelu c;
  c.alpha = 0.2f;
  EXPECT_EQ(Op(a), Op(b));
  EXPECT_EQ(Op(a).hash(), Op(b).hash());
  EXPECT_FALSE(Op(a) == Op(c));
  EXPECT_FALSE(Op(a) == Op(ops::Relu{}));
}

TEST(Op, ConstantsCompareByValue) {
  ops::Constant x, y, z;
  x.value = Tensor::from_vector<float>({1, 2, 3});
  y.value = Tensor::from_vector<float>({1, 2, 3});
  z.value = Tensor::from_vector<float>({1, 2, 4});
  EXPECT_EQ(Op(x), Op(y));
  EXPECT_EQ(Op(x).hash(), Op(y).hash());
  EXPECT_FALSE(Op(x) == Op(z));
}

TEST(Op, AttributesPrintInDeclarationOrderSkippingAbsentOnes) {
  ops::Conv conv;
  conv.strides = std::vector<int64_t>{2, 2};
  EXPECT_EQ(Op(conv).attributes_string(), "[auto_pad=\"NOTSET\", group=1, strides=[2,2]]");
  EXPECT_EQ(Op(ops::Relu{}).attributes_string(), "");
  ops::Constant c;
  c.value = Tensor::from_vector<int64_t>({4, 5});
  EXPECT_EQ(Op(c).attributes_string(), "[value=i64[2]{4,5}]");
}

}  // namespace
}  // namespace kiln::compiler
