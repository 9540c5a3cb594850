// SPDX-License-Identifier: Apache-2.0
// float64 conversion: f32 graphs computed in f64 on ref, with f32 inputs and f64 outputs.
#include <cmath>

#include "compiler/passes/pass_test_util.h"
#include "compiler/quantize/quantize.h"

namespace kiln::compiler {
namespace {

using testing::f32;

Result<std::vector<Argument>> run_on_ref(std::shared_ptr<Graph> g, std::vector<Argument> inputs) {
  KILN_ASSIGN_OR_RETURN(auto target, make_target("ref"));
  KILN_ASSIGN_OR_RETURN(auto exe, compile(std::move(g), *target));
  return exe->run(std::move(inputs));
}

// x: f32[3] -> (x + 1e-9) - x -> y; also a Cast to f32 and a default ConstantOfShape (f32 zeros)
// added to it -> z.
std::shared_ptr<Graph> tiny_difference() {
  auto g = std::make_shared<Graph>("tiny");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({3}));
  ops::Constant eps;
  eps.value_float = 1e-9f;
  Value* e = b.add(Op(eps), {}, "eps");
  Value* y = b.add(Op(ops::Sub{}), {b.add(Op(ops::Add{}), {x, e}, "sum"), x}, "y");
  ops::Cast to_f32;
  to_f32.to = DType::kF32;
  Value* cast = b.add(Op(to_f32), {y}, "cast");
  Value* zeros =
      b.add(Op(ops::ConstantOfShape{}),
            {b.constant(Tensor::from_vector(std::vector<int64_t>{3}), "shape")}, "zeros");
  b.output(y);
  b.output(b.add(Op(ops::Add{}), {cast, zeros}, "z"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return g;
}

Tensor ones() {
  return Tensor::from_vector(std::vector<float>{1.0f, 1000.0f, -1.0f});
}

TEST(Float64Conversion, ComputesInDoubleWithTheSameInputs) {
  auto as_f32 = run_on_ref(tiny_difference(), {Argument(ones())});
  ASSERT_TRUE(as_f32.ok()) << as_f32.status().to_string();
  EXPECT_EQ((*as_f32)[0].tensor().data<float>()[1], 0.0f) << "f32 loses 1e-9 next to 1000";

  std::shared_ptr<Graph> g = tiny_difference();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  EXPECT_EQ(g->inputs()[0]->type().to_string(), "f32[3]");
  EXPECT_EQ(g->outputs()[0]->type().to_string(), "f64[3]");
  EXPECT_EQ(g->outputs()[1]->type().to_string(), "f64[3]");
  auto out = run_on_ref(g, {Argument(ones())});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int k : {0, 1}) {
    const Tensor& t = (*out)[static_cast<size_t>(k)].tensor();
    ASSERT_EQ(t.dtype(), DType::kF64);
    // 1e-9 as an f32 constant, widened exactly; what is left of it next to 1000 in doubles.
    EXPECT_NEAR(t.data<double>()[0], static_cast<double>(1e-9f), 1e-15);
    EXPECT_NEAR(t.data<double>()[1], static_cast<double>(1e-9f), 1e-12);
  }
}

TEST(Float64Conversion, ResizeScalesStayF32) {
  auto g = std::make_shared<Graph>("resize");
  GraphBuilder b(*g);
  Value* x = b.input("x", f32({1, 1, 2, 2}));
  Value* roi = b.constant(Tensor::from_vector(std::vector<float>{}), "roi");
  Value* scales = b.constant(Tensor::from_vector(std::vector<float>{1, 1, 2, 2}), "scales");
  b.output(b.add(Op(ops::Resize{}), {x, roi, scales}, "y"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  Status converted = convert_to_f64(*g);
  ASSERT_TRUE(converted.ok()) << converted.to_string();
  const std::vector<float> values = {1, 2, 3, 4};
  auto out = run_on_ref(
      g, {Argument(Tensor::from_vector(std::span<const float>(values), Shape({1, 1, 2, 2})))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.dtype(), DType::kF64);
  ASSERT_EQ(y.shape(), Shape({1, 1, 4, 4}));
  EXPECT_EQ(y.data<double>()[0], 1.0);
  EXPECT_EQ(y.data<double>()[15], 4.0);
}

}  // namespace
}  // namespace kiln::compiler
