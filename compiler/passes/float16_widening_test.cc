// SPDX-License-Identifier: Apache-2.0
// Float16 widening: a float16 Conv graph computes in float32 between Casts at its edges; a graph
// without float16 compute ops is left as it is.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

Tensor half_tensor(Shape shape, std::vector<float> values) {
  Tensor t(DType::kF16, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.data<Half>()[i] = Half(values[i]);
  return t;
}

TEST(Float16Widening, AFloat16ConvComputesInFloat32BetweenCastsAtTheEdges) {
  Graph g("half");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF16, Shape{1, 1, 2, 2}));
  Value* w = b.constant(half_tensor(Shape{1, 1, 1, 1}, {0.5f}), "w");
  Value* y = b.add(Op(ops::Conv{}), {x, w}, "conv");
  b.output(b.add(Op(ops::Relu{}), {y}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto pass = make_float16_widening();
  EXPECT_TRUE(testing::expect_rewrite(
      g, *pass,
      "graph half(%x: f16[1,1,2,2]) {\n"
      "  %w: f16[1,1,1,1] = Constant[value=f16[1,1,1,1]{0.5}]()  # \"w\"\n"
      "  %conv: f16[1,1,2,2] = Conv[auto_pad=\"NOTSET\", group=1](%x, %w)  # \"conv\"\n"
      "  %y: f16[1,1,2,2] = Relu(%conv)  # \"y\"\n"
      "  return %y\n"
      "}\n",
      "graph half(%x: f16[1,1,2,2]) {\n"
      "  %x_f32_1: f32[1,1,2,2] = Cast[to=f32](%x)  # \"x_f32\"\n"
      "  %w: f32[1,1,1,1] = Constant[value=f32[1,1,1,1]{0.5}]()  # \"w\"\n"
      "  %conv: f32[1,1,2,2] = Conv[auto_pad=\"NOTSET\", group=1](%x_f32_1, %w)  # \"conv\"\n"
      "  %y_f16_1: f32[1,1,2,2] = Relu(%conv)  # \"y\"\n"
      "  %y: f16[1,1,2,2] = Cast[to=f16](%y_f16_1)  # \"y_f16\"\n"
      "  return %y\n"
      "}\n"));
}

TEST(Float16Widening, LeavesAGraphWithoutFloat16ComputeOps) {
  Graph g("cast");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{4}));
  ops::Cast to_half;
  to_half.to = DType::kF16;
  b.output(b.add(Op(ops::Relu{}), {b.add(Op(to_half), {x}, "half")}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Result<bool> changed = make_float16_widening()->run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.outputs()[0]->tensor_type().dtype, DType::kF16);
}

}  // namespace
}  // namespace kiln::compiler
