// SPDX-License-Identifier: Apache-2.0
// Type refinement: a Reshape whose shape input was folded gets its static type.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::f32;

TEST(TypeRefinement, AFoldedReshapeTargetGivesAStaticShape) {
  Graph g("refine");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 6}));
  Value* target = b.constant(Tensor::from_vector(std::vector<int64_t>{3, 4}), "target");
  Value* shape = b.add(Op(ops::Identity{}), {target}, "shape");
  Value* y = b.add(Op(ops::Reshape{}), {x, shape}, "y");
  Value* z = b.add(Op(ops::Relu{}), {y}, "z");
  b.output(z);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  ASSERT_FALSE(y->tensor_type().is_static()) << y->tensor_type().to_string();

  ASSERT_TRUE(make_constant_folding()->run(g).ok());
  ASSERT_FALSE(g.outputs()[0]->tensor_type().is_static()) << print_graph(g);
  auto pass = make_type_refinement();
  Result<bool> changed = pass->run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(g.outputs()[0]->tensor_type().to_string(), "f32[3,4]") << print_graph(g);
  EXPECT_TRUE(verify_graph(g).ok());
  Result<bool> again = pass->run(g);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "nothing left to refine";
}

TEST(TypeRefinement, StaticTypesAreKept) {
  Graph g("keep");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 3}));
  b.output(b.add(Op(ops::Relu{}), {x}, "y"));
  ASSERT_TRUE(b.status().ok());
  const std::string before = print_graph(g);
  Result<bool> changed = make_type_refinement()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(print_graph(g), before);
}

}  // namespace
}  // namespace kiln::compiler
