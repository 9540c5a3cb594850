// SPDX-License-Identifier: Apache-2.0
// Constant folding, before and after.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::expect_rewrite;
using testing::f32;

TEST(ConstantFolding, FoldsConstantSubgraphsAndStaticShapes) {
  Graph g("cf");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 3}));
  Value* c1 = b.constant(Tensor::from_vector<float>({1, 2, 3}), "c1");
  Value* c2 = b.constant(Tensor::from_vector<float>({10, 20, 30}), "c2");
  Value* s = b.add(Op(ops::Add{}), {c1, c2}, "s");
  b.output(b.add(Op(ops::Add{}), {x, s}, "y"));
  b.output(b.add(Op(ops::Shape{}), {x}, "shape"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();

  auto pass = make_constant_folding();
  EXPECT_TRUE(expect_rewrite(g, *pass,
                             "graph cf(%x: f32[2,3]) {\n"
                             "  %c1: f32[3] = Constant[value=f32[3]{1,2,3}]()  # \"c1\"\n"
                             "  %c2: f32[3] = Constant[value=f32[3]{10,20,30}]()  # \"c2\"\n"
                             "  %s: f32[3] = Add(%c1, %c2)  # \"s\"\n"
                             "  %y: f32[2,3] = Add(%x, %s)  # \"y\"\n"
                             "  %shape: i64[2] = Shape[start=0](%x)  # \"shape\"\n"
                             "  return %y, %shape\n"
                             "}\n",
                             "graph cf(%x: f32[2,3]) {\n"
                             "  %s_folded: f32[3] = Constant[value=f32[3]{11,22,33}]()  # \"s\"\n"
                             "  %y: f32[2,3] = Add(%x, %s_folded)  # \"y\"\n"
                             "  %shape: i64[2] = Constant[value=i64[2]{2,3}]()  # \"shape\"\n"
                             "  return %y, %shape\n"
                             "}\n"));
}

TEST(ConstantFolding, LeavesRandomOpsAndDynamicShapes) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("N"), 3}));
  b.output(b.add(Op(ops::Shape{}), {x}, "shape"));
  b.output(
      b.add(Op(ops::RandomUniformLike{}), {b.constant(Tensor(DType::kF32, Shape{2}), "z")}, "r"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  std::string before = print_graph(g);
  Result<bool> changed = make_constant_folding()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(print_graph(g), before);
}

TEST(ConstantFolding, IsDeterministic) {
  auto build = [](Graph& g) {
    GraphBuilder b(g);
    Value* x = b.input("x", f32({4}));
    Value* c = b.add(Op(ops::Mul{}),
                     {b.constant(Tensor::from_vector<float>({2, 2, 2, 2}), "two"),
                      b.constant(Tensor::from_vector<float>({1, 2, 3, 4}), "k")},
                     "scaled");
    b.output(b.add(Op(ops::Add{}), {x, c}, "y"));
  };
  Graph a("d"), b("d");
  build(a);
  build(b);
  ASSERT_TRUE(make_constant_folding()->run(a).ok());
  ASSERT_TRUE(make_constant_folding()->run(b).ok());
  EXPECT_EQ(print_graph(a), print_graph(b));
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// Data movement of constants (an exporter's LSTM weights: Slice, Concat, Unsqueeze) folds by
// copying runs of bytes: the values are the ref kernels', and a reshape shares its input's bytes.
TEST(ConstantFolding, ConcatAndReshapesOfConstantsFoldAsRuns) {
  Graph g("moves");
  GraphBuilder b(g);
  Tensor a = testing::random_tensor(Shape{2, 3, 2}, 1);
  Tensor c = testing::random_tensor(Shape{2, 1, 2}, 2);
  Value* av = b.constant(a, "a");
  Value* cv = b.constant(c, "c");
  ops::Concat concat;
  concat.axis = -2;
  Value* joined = b.add(Op(concat), {av, cv}, "joined");
  Value* unsqueezed =
      b.add(Op(ops::Unsqueeze{}), {av, b.constant(Tensor::from_vector<int64_t>({0}), "axes")}, "u");
  b.output(joined);
  b.output(unsqueezed);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  ASSERT_TRUE(make_constant_folding()->run(g).ok());
  const Tensor* got = g.outputs()[0]->constant_value();
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->shape(), Shape({2, 4, 2}));
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t k = 0; k < 2; ++k) {
        const float want =
            j < 3 ? a.data<float>()[(n * 3 + j) * 2 + k] : c.data<float>()[n * 2 + k];
        EXPECT_EQ(got->data<float>()[(n * 4 + j) * 2 + k], want) << n << " " << j << " " << k;
      }
    }
  }
  const Tensor* shared = g.outputs()[1]->constant_value();
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->shape(), Shape({1, 2, 3, 2}));
  EXPECT_EQ(shared->raw_data(), a.raw_data()) << "the Unsqueeze copied its input";
}

}  // namespace
}  // namespace kiln::compiler
