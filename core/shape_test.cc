// SPDX-License-Identifier: Apache-2.0
// Tests for Shape arithmetic, broadcasting and axis normalization.
#include "core/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;

TEST(Shape, ScalarAndBasics) {
  Shape scalar;
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.strides(), Dims{});
  EXPECT_EQ(scalar.to_string(), "[]");

  Shape s{2, 3, 224, 224};
  EXPECT_EQ(s.rank(), 4);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[3], 224);
  EXPECT_EQ(s.to_string(), "[2,3,224,224]");
  s[0] = 8;
  EXPECT_EQ(s.dims(), (Dims{8, 3, 224, 224}));
  EXPECT_EQ(Shape(Dims{1, 2}), (Shape{1, 2}));
  const int64_t raw[] = {4, 5};
  EXPECT_EQ(Shape(std::span<const int64_t>(raw)), (Shape{4, 5}));
  EXPECT_FALSE((Shape{1, 2}) == (Shape{2, 1}));
  EXPECT_FALSE((Shape{1}) == Shape{});
}

TEST(Shape, Numel) {
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ((Shape{7}).numel(), 7);
  EXPECT_EQ((Shape{2, 0, 4}).numel(), 0);
  EXPECT_EQ((Shape{2, 3, 4, 5}).numel(1, 3), 12);
  EXPECT_EQ((Shape{2, 3, 4, 5}).numel(0, 0), 1);
  EXPECT_EQ((Shape{2, 3, 4, 5}).numel(3, 4), 5);
}

TEST(Shape, Strides) {
  EXPECT_EQ((Shape{2, 3, 4}).strides(), (Dims{12, 4, 1}));
  EXPECT_EQ((Shape{5}).strides(), (Dims{1}));
  EXPECT_EQ((Shape{1, 1, 6}).strides(), (Dims{6, 6, 1}));
  // Like numpy, a zero dim does not zero the strides of the dims before it.
  EXPECT_EQ((Shape{2, 0, 3}).strides(), (Dims{3, 3, 1}));
}

TEST(Shape, CheckedNumel) {
  Result<int64_t> n = (Shape{2, 3, 4}).checked_numel();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 24);
  EXPECT_EQ(*(Shape{}).checked_numel(), 1);
  EXPECT_EQ(*(Shape{0, 5}).checked_numel(), 0);
  EXPECT_EQ(*(Shape{INT64_MAX}).checked_numel(), INT64_MAX);
  EXPECT_EQ(*(Shape{1000, 1000}).checked_numel(1000000), 1000000);

  Result<int64_t> negative = (Shape{2, -1, 3}).checked_numel();
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "shape [2,-1,3] has a negative dim");

  Result<int64_t> overflow = (Shape{1LL << 32, 1LL << 32}).checked_numel();
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(overflow.status().message().find("[4294967296,4294967296]"), std::string_view::npos)
      << overflow.status().message();

  Result<int64_t> big = (Shape{3, INT64_MAX / 2}).checked_numel();
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);

  Result<int64_t> limited = (Shape{1000, 1001}).checked_numel(1000000);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.status().message(), "shape [1000,1001] has more than 1000000 elements");
}

TEST(Shape, Broadcast) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {Shape{2, 3}, Shape{2, 3}, Shape{2, 3}},
      {Shape{2, 3}, Shape{3}, Shape{2, 3}},
      {Shape{3}, Shape{2, 3}, Shape{2, 3}},
      {Shape{4, 1, 5}, Shape{3, 1}, Shape{4, 3, 5}},
      {Shape{}, Shape{2, 2}, Shape{2, 2}},
      {Shape{1}, Shape{}, Shape{1}},
      {Shape{}, Shape{}, Shape{}},
      {Shape{0, 1}, Shape{1, 7}, Shape{0, 7}},
      {Shape{1, 7}, Shape{0, 1}, Shape{0, 7}},
      {Shape{8, 1, 6, 1}, Shape{7, 1, 5}, Shape{8, 7, 6, 5}},
  };
  for (const Case& c : cases) {
    Result<Shape> r = broadcast_shapes(c.a, c.b);
    ASSERT_TRUE(r.ok()) << c.a.to_string() << " " << c.b.to_string() << ": "
                        << r.status().to_string();
    EXPECT_EQ(r->to_string(), c.out.to_string()) << c.a.to_string() << " " << c.b.to_string();
  }
}

TEST(Shape, BroadcastErrors) {
  Result<Shape> r = broadcast_shapes(Shape{2, 3}, Shape{4});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "shapes [2,3] and [4] do not broadcast (dim 1: 3 vs 4)");

  Result<Shape> zero = broadcast_shapes(Shape{0}, Shape{2});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);

  Result<Shape> leading = broadcast_shapes(Shape{5, 1, 1}, Shape{3, 1, 1});
  ASSERT_FALSE(leading.ok());
  EXPECT_NE(leading.status().message().find("dim 0: 5 vs 3"), std::string_view::npos);
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(*normalize_axis(0, 3), 0);
  EXPECT_EQ(*normalize_axis(2, 3), 2);
  EXPECT_EQ(*normalize_axis(-1, 3), 2);
  EXPECT_EQ(*normalize_axis(-3, 3), 0);
  EXPECT_EQ(*normalize_axis(0, 1), 0);
  EXPECT_EQ(*normalize_axis(-1, 1), 0);

  for (int64_t bad : {3LL, 4LL, -4LL, 1LL << 40, -(1LL << 40)}) {
    Result<int> r = normalize_axis(bad, 3);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  }
  EXPECT_EQ(normalize_axis(3, 3).status().message(), "axis 3 is out of range for rank 3");
  // A scalar has no axes: the result must never be an index into an empty dims().
  EXPECT_FALSE(normalize_axis(0, 0).ok());
  EXPECT_FALSE(normalize_axis(-1, 0).ok());
}

}  // namespace
}  // namespace kiln
