// SPDX-License-Identifier: Apache-2.0
// HardSwish fusion: hard-swish written as Add, Clip, Mul and Div (paddle2onnx, torch below opset
// 14) becomes one HardSwish computing the same values; near misses stay.
#include <map>

#include "compiler/passes/pass_test_util.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

using testing::f32;

// The forms: x * Clip(x + 3, 0, 6) / 6, the same times 1/6, x * (Clip(3 + x, 0, 6) / 6), and
// x * HardSigmoid(x) with alpha 1/6, beta 1/2.
enum class Form { kDivided, kTimesSixth, kGate, kHardSigmoid };

struct Variant {
  float shift = 3.0f;           // the Add's constant
  float hi = 6.0f;              // the Clip's upper bound
  bool add_read_twice = false;  // the Add's output also returned
};

void build(Graph& g, Form form, Variant v = {}) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 4, 5, 5}));
  auto relu6 = [&](bool swapped) {
    Value* three = b.constant(Tensor::scalar(v.shift), "three");
    Value* sum =
        b.add(Op(ops::Add{}),
              swapped ? std::vector<Value*>{three, x} : std::vector<Value*>{x, three}, "add");
    if (v.add_read_twice) b.output(sum);
    return b.add(
        Op(ops::Clip{}),
        {sum, b.constant(Tensor::scalar(0.0f), "lo"), b.constant(Tensor::scalar(v.hi), "hi")},
        "clip");
  };
  Value* six = b.constant(Tensor::scalar(6.0f), "six");
  Value* sixth = b.constant(Tensor::scalar(1.0f / 6.0f), "sixth");
  Value* y = nullptr;
  switch (form) {
    case Form::kDivided:
      y = b.add(Op(ops::Div{}), {b.add(Op(ops::Mul{}), {x, relu6(false)}, "mul"), six}, "div");
      break;
    case Form::kTimesSixth:
      y = b.add(Op(ops::Mul{}), {sixth, b.add(Op(ops::Mul{}), {relu6(false), x}, "mul")}, "scale");
      break;
    case Form::kGate:
      y = b.add(Op(ops::Mul{}), {x, b.add(Op(ops::Div{}), {relu6(true), six}, "gate")}, "mul");
      break;
    case Form::kHardSigmoid: {
      ops::HardSigmoid hs;
      hs.alpha = 1.0f / 6.0f;
      hs.beta = 0.5f;
      y = b.add(Op(ops::Mul{}), {b.add(Op(hs), {x}, "gate"), x}, "mul");
      break;
    }
  }
  b.output(y);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
}

std::vector<float> run_ref(std::shared_ptr<Graph> g, const Tensor& x) {
  auto target = make_target("ref");
  auto exe = compile(std::move(g), **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  auto out = (*exe)->run({Argument(x)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  const Tensor& t = (*out)[out->size() - 1].tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(HardSwishFusion, EveryFormBecomesOneHardSwishWithTheSameValues) {
  // Values around the bends at -3 and 3.
  Tensor x = testing::random_tensor(Shape{1, 4, 5, 5}, 3);
  for (float& v : x.span<float>()) v *= 5.0f;
  for (const Form form : {Form::kDivided, Form::kTimesSixth, Form::kGate, Form::kHardSigmoid}) {
    SCOPED_TRACE(static_cast<int>(form));
    auto fused = std::make_shared<Graph>("hs");
    build(*fused, form);
    auto plain = std::make_shared<Graph>("hs");
    build(*plain, form);
    Result<bool> changed = make_hard_swish_fusion()->run(*fused);
    ASSERT_TRUE(changed.ok()) << changed.status().to_string();
    EXPECT_TRUE(*changed);
    ASSERT_TRUE(make_dead_code_elimination()->run(*fused).ok());
    EXPECT_EQ(testing::op_counts(*fused), (std::map<std::string, int>{{"HardSwish", 1}}))
        << print_graph(*fused);
    EXPECT_TRUE(verify_graph(*fused).ok());
    const std::vector<float> want = run_ref(plain, x);
    const std::vector<float> got = run_ref(fused, x);
    ASSERT_EQ(want.size(), got.size());
    int zeros = 0, linear = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::abs(want[i]))) << i;
      const float in = x.data<float>()[i];
      zeros += in <= -3.0f;
      linear += in >= 3.0f;
    }
    EXPECT_GT(zeros, 0);  // both flat parts were reached
    EXPECT_GT(linear, 0);
  }
}

TEST(HardSwishFusion, NearMissesStay) {
  for (const Variant v :
       {Variant{2.0f, 6.0f, false}, Variant{3.0f, 5.0f, false}, Variant{3.0f, 6.0f, true}}) {
    Graph g("hs");
    build(g, Form::kDivided, v);
    Result<bool> changed = make_hard_swish_fusion()->run(g);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed) << print_graph(g);
  }
}

}  // namespace
}  // namespace kiln::compiler
