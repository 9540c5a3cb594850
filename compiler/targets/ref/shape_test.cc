// SPDX-License-Identifier: Apache-2.0
// Tests of Pad's axes input (opset 18): the pads apply to the named axes only.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {
namespace {

// Pads x [2, 3] = 1..6 with constant 0 by `pads` along `axes`, both given as constants.
Result<Tensor> pad(std::vector<int64_t> pads, std::vector<int64_t> axes) {
  Graph g("t");
  GraphBuilder b(g);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 3}));
  Value* p = b.constant(Tensor::from_vector(pads), "pads");
  Value* zero = b.constant(Tensor::scalar(0.0f), "zero");
  Value* a = b.constant(Tensor::from_vector(axes), "axes");
  b.output(b.add(ops::Pad{}, {x, p, zero, a}, "n"));
  KILN_RETURN_IF_ERROR(b.status());
  ref::Interpreter interpreter;
  std::vector<Argument> args = {
      Argument(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}).reshaped(Shape{2, 3}))};
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> out, interpreter.run(g, std::move(args)));
  return out[0].tensor();
}

std::vector<float> floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

TEST(PadAxes, PadsOnlyTheNamedAxes) {
  Result<Tensor> last = pad({1, 2}, {-1});
  ASSERT_TRUE(last.ok()) << last.status().to_string();
  EXPECT_EQ(last->shape(), (Shape{2, 6}));
  EXPECT_EQ(floats(*last), (std::vector<float>{0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0}));
  Result<Tensor> first = pad({0, 1}, {0});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->shape(), (Shape{3, 3}));
  EXPECT_EQ(floats(*first), (std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0}));
  // Axes in any order: the pads follow them (begins of axes 1 and 0, then their ends).
  Result<Tensor> both = pad({1, 0, 0, 1}, {1, 0});
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->shape(), (Shape{3, 4}));
  EXPECT_EQ(floats(*both), (std::vector<float>{0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0}));
}

TEST(PadAxes, RejectsBadAxesAndCounts) {
  Result<Tensor> count = pad({1, 1, 1, 1}, {1});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("expected 2 pads (twice the 1 axes), got 4"),
            std::string::npos)
      << count.status().to_string();
  Result<Tensor> repeated = pad({1, 1, 1, 1}, {1, -1});
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(repeated.status().message().find("repeat an axis"), std::string::npos);
  Result<Tensor> range = pad({1, 1}, {2});
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler
