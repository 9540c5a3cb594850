// SPDX-License-Identifier: Apache-2.0
// Tests of the elementwise family: the ref kernels' edge cases and the old-opset ONNX import rows.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"
#include "compiler/targets/ref/run_one_testing.h"

namespace kiln::compiler {
namespace {

using test::run_one;

template <class T>
std::vector<T> values(const Tensor& t) {
  return {t.data<T>(), t.data<T>() + t.numel()};
}

TEST(ElementwiseRef, IntegerDivTruncatesTowardZero) {
  auto a = Tensor::from_vector<int32_t>({-7, 7, -7, 7, std::numeric_limits<int32_t>::min()});
  auto b = Tensor::from_vector<int32_t>({2, -2, -2, 2, -1});
  Result<Tensor> y = run_one(ops::Div{}, {a, b});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<int32_t>(*y),
            (std::vector<int32_t>{-3, -3, 3, 3, std::numeric_limits<int32_t>::min()}));
}

TEST(ElementwiseRef, IntegerDivByZeroIsAnError) {
  Result<Tensor> y =
      run_one(ops::Div{}, {Tensor::from_vector<int64_t>({1}), Tensor::from_vector<int64_t>({0})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("division by zero"), std::string::npos);
}

TEST(ElementwiseRef, ModFollowsPythonOrCSigns) {
  auto a = Tensor::from_vector<int32_t>({-7, 7, -7, 7});
  auto b = Tensor::from_vector<int32_t>({2, -2, -2, 2});
  Result<Tensor> python = run_one(ops::Mod{}, {a, b});
  ASSERT_TRUE(python.ok()) << python.status().to_string();
  EXPECT_EQ(values<int32_t>(*python), (std::vector<int32_t>{1, -1, -1, 1}));
  ops::Mod c_mod;
  c_mod.fmod = 1;
  Result<Tensor> c = run_one(c_mod, {a, b});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(values<int32_t>(*c), (std::vector<int32_t>{-1, 1, -1, 1}));
}

TEST(ElementwiseRef, ModOfFloatsWithoutFmodTakesTheDivisorsSign) {
  auto a = Tensor::from_vector<float>({-4.5f, 7.5f, 5.0f, 4.5f});
  auto b = Tensor::from_vector<float>({2.0f, -2.0f, 2.5f, 2.0f});
  Result<Tensor> y = run_one(ops::Mod{}, {a, b});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<float>(*y), (std::vector<float>{1.5f, -0.5f, 0.0f, 0.5f}));
}

TEST(ElementwiseRef, SignedBitShiftsWrapLeftAndFillRight) {
  auto x = Tensor::from_vector<int8_t>({-8, 64, -1, -128, 16, -8});
  auto s = Tensor::from_vector<int8_t>({1, 1, 8, 1, -1, 100});
  ops::BitShift left, right;
  left.direction = "LEFT";
  right.direction = "RIGHT";
  Result<Tensor> l = run_one(left, {x, s});
  Result<Tensor> r = run_one(right, {x, s});
  ASSERT_TRUE(l.ok() && r.ok()) << l.status().to_string() << r.status().to_string();
  EXPECT_EQ(values<int8_t>(*l), (std::vector<int8_t>{-16, -128, 0, 0, 0, 0}));
  EXPECT_EQ(values<int8_t>(*r), (std::vector<int8_t>{-4, 32, -1, -64, 0, -1}));
}

TEST(ElementwiseRef, BitwiseOpsBroadcastOverIntegers) {
  auto a = Tensor::from_vector<int16_t>({0x0f0f, -1, 0});
  auto b = Tensor::from_vector<int16_t>({0x00ff});
  Result<Tensor> y_and = run_one(ops::BitwiseAnd{}, {a, b});
  Result<Tensor> y_or = run_one(ops::BitwiseOr{}, {a, b});
  Result<Tensor> y_xor = run_one(ops::BitwiseXor{}, {a, b});
  Result<Tensor> y_not = run_one(ops::BitwiseNot{}, {a});
  ASSERT_TRUE(y_and.ok() && y_or.ok() && y_xor.ok() && y_not.ok());
  EXPECT_EQ(values<int16_t>(*y_and), (std::vector<int16_t>{0x000f, 0x00ff, 0}));
  EXPECT_EQ(values<int16_t>(*y_or), (std::vector<int16_t>{0x0fff, -1, 0x00ff}));
  EXPECT_EQ(values<int16_t>(*y_xor), (std::vector<int16_t>{0x0ff0, -256, 0x00ff}));
  EXPECT_EQ(values<int16_t>(*y_not), (std::vector<int16_t>{-0x0f10, 0, -1}));
  EXPECT_FALSE(run_one(ops::BitwiseAnd{}, {Tensor::from_vector<float>({1.0f}),
                                           Tensor::from_vector<float>({1.0f})})
                   .ok());
}

TEST(ElementwiseRef, CastFloatToIntTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ops::Cast cast;
  cast.to = DType::kI32;
  Result<Tensor> y = run_one(cast, {Tensor::from_vector<float>({nan, 1e10f, -1e10f, -3.7f, 3.7f})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<int32_t>(*y),
            (std::vector<int32_t>{0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), -3, 3}));
}

TEST(ElementwiseRef, CastDoubleToHalfRoundsOnce) {
  // 1 + 2^-11 + 2^-40 lies just above the midpoint of two halfs: rounding through float would
  // drop the 2^-40 and round the tie down to even (1.0).
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ops::Cast cast;
  cast.to = DType::kF16;
  Result<Tensor> y = run_one(cast, {Tensor::from_vector<double>({x})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(static_cast<float>(y->data<Half>()[0]), 1.0f + std::ldexp(1.0f, -10));
}

TEST(ElementwiseRef, CastBetweenStringsAndNumbers) {
  ops::Cast to_float;
  to_float.to = DType::kF32;
  auto s = Tensor::from_vector<std::string>({"3.5", "-INF", "+inf", "1e-5"});
  Result<Tensor> f = run_one(to_float, {s});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(values<float>(*f), (std::vector<float>{3.5f, -INFINITY, INFINITY, 1e-5f}));

  ops::Cast to_string;
  to_string.to = DType::kString;
  Result<Tensor> t = run_one(to_string, {Tensor::from_vector<float>({0.47892547f, -2.0f, NAN})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(values<std::string>(*t), (std::vector<std::string>{"0.47892547", "-2", "nan"}));
}

TEST(ElementwiseRef, MaxAndMinPropagateNaN) {
  auto a = Tensor::from_vector<float>({NAN, 1.0f});
  auto b = Tensor::from_vector<float>({1.0f, NAN});
  for (Op op : {Op(ops::Max{}), Op(ops::Min{})}) {
    Result<Tensor> y = run_one(op, {a, b});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    EXPECT_TRUE(std::isnan(y->data<float>()[0]) && std::isnan(y->data<float>()[1])) << op.name();
  }
}

TEST(ElementwiseRef, IntegerArithmeticWraps) {
  auto a = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max()});
  Result<Tensor> y = run_one(ops::Add{}, {a, Tensor::from_vector<int64_t>({1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->data<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(ElementwiseRef, PowKeepsTheBaseType) {
  auto base = Tensor::from_vector<int32_t>({1, 2, 3, 2});
  Result<Tensor> y =
      run_one(ops::Pow{}, {base, Tensor::from_vector<float>({4.0f, 5.0f, 6.0f, -1.0f})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<int32_t>(*y), (std::vector<int32_t>{1, 32, 729, 0}));
}

TEST(ElementwiseRef, GeluMishAndSwishFollowTheirFormulas) {
  const Tensor x = Tensor::from_vector<float>({-1, 0, 1, 2.5f});
  ops::Gelu tanh_form;
  tanh_form.approximate = "tanh";
  ops::Swish swish;
  swish.alpha = 2.0f;
  Result<Tensor> exact = run_one(ops::Gelu{}, {x});
  Result<Tensor> approx = run_one(tanh_form, {x});
  Result<Tensor> mish = run_one(ops::Mish{}, {x});
  Result<Tensor> sw = run_one(swish, {x});
  for (const auto* r : {&exact, &approx, &mish, &sw})
    ASSERT_TRUE(r->ok()) << r->status().to_string();
  for (int i = 0; i < 4; ++i) {
    const double v = x.data<float>()[i];
    EXPECT_NEAR(exact->data<float>()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(approx->data<float>()[i],
                0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-6);
    EXPECT_NEAR(mish->data<float>()[i], v * std::tanh(std::log1p(std::exp(v))), 1e-6);
    EXPECT_NEAR(sw->data<float>()[i], v / (1 + std::exp(-2 * v)), 1e-6);
  }
  // The erf and tanh forms differ (by 1.5e-4 at x = -1).
  EXPECT_GT(std::fabs(exact->data<float>()[0] - approx->data<float>()[0]), 1e-4f);
  tanh_form.approximate = "fast";
  EXPECT_FALSE(run_one(tanh_form, {x}).ok());
}

TEST(ElementwiseRef, SwiGLUGatesBWithTheSwishOfA) {
  ops::SwiGLU op;
  op.alpha = 1.5f;
  const Tensor a = Tensor::from_vector<float>({1, -1, 0.5f});
  const Tensor b = Tensor::from_vector<float>({2, 3, -4});
  Result<Tensor> y = run_one(op, {a, b});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int i = 0; i < 3; ++i) {
    const double va = a.data<float>()[i];
    EXPECT_NEAR(y->data<float>()[i], va / (1 + std::exp(-1.5 * va)) * b.data<float>()[i], 1e-6);
  }
  // No broadcasting: B must have A's shape.
  Result<Tensor> broadcast = run_one(op, {a, Tensor::from_vector<float>({2})});
  ASSERT_FALSE(broadcast.ok());
  EXPECT_NE(broadcast.status().message().find("does not broadcast"), std::string::npos)
      << broadcast.status().to_string();
}

TEST(ElementwiseInfer, RejectsMixedTypesAndBadShapes) {
  EXPECT_FALSE(
      run_one(ops::Add{}, {Tensor::from_vector<float>({1}), Tensor::from_vector<double>({1})})
          .ok());
  EXPECT_FALSE(
      run_one(ops::Add{}, {Tensor(DType::kF32, Shape{2}), Tensor(DType::kF32, Shape{3})}).ok());
  EXPECT_FALSE(run_one(ops::BitShift{},
                       {Tensor::from_vector<uint8_t>({1}), Tensor::from_vector<uint8_t>({1})})
                   .ok());
  EXPECT_FALSE(run_one(ops::Sqrt{}, {Tensor::from_vector<int32_t>({4})}).ok());
}

// ---- old-opset import ----

onnx::ValueInfoProto tensor_info(const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

// One node named "n" of `op_type` from inputs a (and b) to y at `opset`.
onnx::ModelProto one_node_model(const std::string& op_type, int64_t opset, std::vector<int64_t> a,
                                std::optional<std::vector<int64_t>> b, std::vector<int64_t> y) {
  onnx::ModelProto m;
  m.set_ir_version(3);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_input() = tensor_info("a", std::move(a));
  if (b) *g->add_input() = tensor_info("b", std::move(*b));
  *g->add_output() = tensor_info("y", std::move(y));
  auto* n = g->add_node();
  n->set_op_type(op_type);
  n->set_name("n");
  n->add_input("a");
  if (b) n->add_input("b");
  n->add_output("y");
  return m;
}

void add_int_attr(onnx::ModelProto& m, const std::string& name, int64_t v) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void add_float_attr(onnx::ModelProto& m, const std::string& name, float v) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

Result<std::vector<Argument>> import_and_run(const onnx::ModelProto& m,
                                             std::vector<Argument> inputs) {
  std::string s = m.SerializeAsString();
  std::vector<uint8_t> bytes(s.begin(), s.end());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                        import_onnx_bytes(bytes, ImportOptions{}, "m.onnx"));
  ref::Interpreter interpreter;
  return interpreter.run(*model->graph, std::move(inputs));
}

TEST(ElementwiseImport, LegacyBroadcastAlignsBAtAxis) {
  onnx::ModelProto m = one_node_model("Add", 6, {2, 3, 2}, std::vector<int64_t>{3}, {2, 3, 2});
  add_int_attr(m, "broadcast", 1);
  add_int_attr(m, "axis", 1);
  Tensor a(DType::kF32, Shape{2, 3, 2});
  Result<std::vector<Argument>> out =
      import_and_run(m, {Argument(a), Argument(Tensor::from_vector<float>({1, 2, 3}))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0].tensor()),
            (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST(ElementwiseImport, PReluBeforeOpset7IsPerChannel) {
  onnx::ModelProto m = one_node_model("PRelu", 6, {1, 2, 2}, std::vector<int64_t>{2}, {1, 2, 2});
  Result<std::vector<Argument>> out = import_and_run(
      m, {Argument(Tensor::from_vector<float>({-1, -1, -1, -1}).reshaped(Shape{1, 2, 2})),
          Argument(Tensor::from_vector<float>({0.5f, 2.0f}))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0].tensor()), (std::vector<float>{-0.5f, -0.5f, -2.0f, -2.0f}));
}

TEST(ElementwiseImport, ClipBeforeOpset11TakesAttributes) {
  onnx::ModelProto m = one_node_model("Clip", 6, {3}, std::nullopt, {3});
  add_float_attr(m, "min", -1.0f);
  Result<std::vector<Argument>> out =
      import_and_run(m, {Argument(Tensor::from_vector<float>({-5, 0, 5}))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0].tensor()), (std::vector<float>{-1, 0, 5}));
}

TEST(ElementwiseImport, ConsumedInputsIsIgnoredBeforeOpset6) {
  onnx::ModelProto m = one_node_model("Relu", 1, {2}, std::nullopt, {2});
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("consumed_inputs");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(0);
  Result<std::vector<Argument>> out =
      import_and_run(m, {Argument(Tensor::from_vector<float>({-1, 2}))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0].tensor()), (std::vector<float>{0, 2}));
}

}  // namespace
}  // namespace kiln::compiler
