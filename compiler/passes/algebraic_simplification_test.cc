// SPDX-License-Identifier: Apache-2.0
// Algebraic simplification, before and after.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

TEST(AlgebraicSimplification, RemovesNeutralOperationsIdentityAndSameTypeCast) {
  Graph g("alg");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 2}));
  Value* one = b.constant(Tensor::from_vector<float>({1, 1}), "one");
  Value* zero = b.constant(Tensor::scalar<float>(0), "zero");
  Value* m = b.add(Op(ops::Mul{}), {x, one}, "m");
  Value* a = b.add(Op(ops::Add{}), {zero, m}, "a");
  Value* i = b.add(Op(ops::Identity{}), {a}, "i");
  ops::Cast cast;
  cast.to = DType::kF32;
  Value* c = b.add(Op(cast), {i}, "c");
  Value* d = b.add(Op(ops::Dropout{}), {c}, "d");
  b.output(b.add(Op(ops::Relu{}), {d}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_algebraic_simplification();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph alg(%x: f32[2,2]) {\n"
                             "  %one: f32[2] = Constant[value=f32[2]{1,1}]()  # \"one\"\n"
                             "  %zero: f32[] = Constant[value=f32[]{0}]()  # \"zero\"\n"
                             "  %m: f32[2,2] = Mul(%x, %one)  # \"m\"\n"
                             "  %a: f32[2,2] = Add(%zero, %m)  # \"a\"\n"
                             "  %i: f32[2,2] = Identity(%a)  # \"i\"\n"
                             "  %c: f32[2,2] = Cast[to=f32](%i)  # \"c\"\n"
                             "  %d: f32[2,2] = Dropout(%c)  # \"d\"\n"
                             "  %y: f32[2,2] = Relu(%d)  # \"y\"\n"
                             "  return %y\n"
                             "}\n",
                             "graph alg(%x: f32[2,2]) {\n"
                             "  %y: f32[2,2] = Relu(%x)  # \"y\"\n"
                             "  return %y\n"
                             "}\n"));
}

TEST(AlgebraicSimplification, KeepsOperandsThatBroadcast) {
  Graph g("bcast");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2}));
  Value* ones = b.constant(Tensor(DType::kF32, Shape{3, 2}), "zeros");
  b.output(b.add(Op(ops::Add{}), {x, ones}, "y"));  // the output is [3,2], not x
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_algebraic_simplification()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

TEST(AlgebraicSimplification, FusesTransposesAndReshapes) {
  Graph g("tr");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 3, 4}));
  ops::Transpose t1, t2, t3;
  t1.perm = std::vector<int64_t>{1, 0, 2};
  t2.perm = std::vector<int64_t>{1, 0, 2};
  t3.perm = std::vector<int64_t>{2, 0, 1};
  Value* a = b.add(Op(t1), {x}, "t1");
  Value* back = b.add(Op(t2), {a}, "t2");  // t2∘t1 is the identity
  Value* c = b.add(Op(t3), {back}, "t3");
  Value* r1 =
      b.add(Op(ops::Reshape{}), {c, b.constant(Tensor::from_vector<int64_t>({8, 3}), "s1")}, "r1");
  Value* r2 =
      b.add(Op(ops::Reshape{}), {r1, b.constant(Tensor::from_vector<int64_t>({4, 6}), "s2")}, "r2");
  b.output(b.add(Op(ops::Reshape{}), {r2, b.constant(Tensor::from_vector<int64_t>({4, 6}), "s3")},
                 "r3"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_algebraic_simplification();
  expect_rewrite(g, *pass,
                 "graph tr(%x: f32[2,3,4]) {\n"
                 "  %t1: f32[3,2,4] = Transpose[perm=[1,0,2]](%x)  # \"t1\"\n"
                 "  %t2: f32[2,3,4] = Transpose[perm=[1,0,2]](%t1)  # \"t2\"\n"
                 "  %t3: f32[4,2,3] = Transpose[perm=[2,0,1]](%t2)  # \"t3\"\n"
                 "  %s1: i64[2] = Constant[value=i64[2]{8,3}]()  # \"s1\"\n"
                 "  %r1: f32[8,3] = Reshape[allowzero=0](%t3, %s1)  # \"r1\"\n"
                 "  %s2: i64[2] = Constant[value=i64[2]{4,6}]()  # \"s2\"\n"
                 "  %r2: f32[4,6] = Reshape[allowzero=0](%r1, %s2)  # \"r2\"\n"
                 "  %s3: i64[2] = Constant[value=i64[2]{4,6}]()  # \"s3\"\n"
                 "  %r3: f32[4,6] = Reshape[allowzero=0](%r2, %s3)  # \"r3\"\n"
                 "  return %r3\n"
                 "}\n",
                 "graph tr(%x: f32[2,3,4]) {\n"
                 "  %t3: f32[4,2,3] = Transpose[perm=[2,0,1]](%x)  # \"t3\"\n"
                 "  %s3: i64[2] = Constant[value=i64[2]{4,6}]()  # \"s3\"\n"
                 "  %r3: f32[4,6] = Reshape[allowzero=0](%t3, %s3)  # \"r3\"\n"
                 "  return %r3\n"
                 "}\n");
}

TEST(AlgebraicSimplification, RemovesPadByZerosAndKeepsARealPad) {
  Graph g("pad");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 2, 4, 4}));
  Value* zeros = b.constant(Tensor::from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0}), "zeros");
  Value* ones = b.constant(Tensor::from_vector<int64_t>({0, 0, 1, 1, 0, 0, 1, 1}), "ones");
  Value* same = b.add(Op(ops::Pad{}), {x, zeros}, "same");
  b.output(b.add(Op(ops::Pad{}), {same, ones}, "grown"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_algebraic_simplification();
  EXPECT_TRUE(
      expect_rewrite(g, *pass,
                     "graph pad(%x: f32[1,2,4,4]) {\n"
                     "  %zeros: i64[8] = Constant[value=i64[8]{0,0,0,0,0,0,0,0}]()  # \"zeros\"\n"
                     "  %ones: i64[8] = Constant[value=i64[8]{0,0,1,1,0,0,1,1}]()  # \"ones\"\n"
                     "  %same: f32[1,2,4,4] = Pad[mode=\"constant\"](%x, %zeros)  # \"same\"\n"
                     "  %grown: f32[1,2,6,6] = Pad[mode=\"constant\"](%same, %ones)  # \"grown\"\n"
                     "  return %grown\n"
                     "}\n",
                     "graph pad(%x: f32[1,2,4,4]) {\n"
                     "  %ones: i64[8] = Constant[value=i64[8]{0,0,1,1,0,0,1,1}]()  # \"ones\"\n"
                     "  %grown: f32[1,2,6,6] = Pad[mode=\"constant\"](%x, %ones)  # \"grown\"\n"
                     "  return %grown\n"
                     "}\n"));
}

}  // namespace
}  // namespace kiln::compiler
