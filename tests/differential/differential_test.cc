// SPDX-License-Identifier: Apache-2.0
// The differential tester's own tests, a short run of every pattern against the cpu target, and
// the fixed cases of the cpu target bugs it found.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compiler/targets/target.h"
#include "tests/differential/case.h"
#include "tests/differential/runner.h"

namespace kiln::differential {
namespace {

bool has_cpu() {
  return target_available("cpu").ok();
}

// Runs `seeds` of `pattern` against the cpu target; fails describing the first failing case.
void expect_agree(std::string_view pattern, uint64_t first, uint64_t end) {
  const Pattern* p = find_pattern(pattern);
  ASSERT_NE(p, nullptr) << pattern;
  RunnerOptions options;
  int run = 0;
  for (uint64_t seed = first; seed < end; ++seed) {
    const Case c = make_case(*p, seed);
    const CaseResult r = run_case(c, options);
    EXPECT_TRUE(r.invalid.empty()) << pattern << " seed " << seed << ": " << r.invalid;
    if (!r.failures.empty()) {
      ADD_FAILURE() << describe(c, r.failures.front(), options);
      return;
    }
    run += r.invalid.empty() ? 1 : 0;
  }
  EXPECT_EQ(run, static_cast<int>(end - first));
}

TEST(DifferentialCase, SameSeedSameModelOtherSeedOther) {
  for (const Pattern& p : patterns()) {
    const Case a = make_case(p, 7);
    const Case b = make_case(p, 7);
    const Case c = make_case(p, 8);
    EXPECT_EQ(a.model.SerializeAsString(), b.model.SerializeAsString()) << p.name;
    ASSERT_EQ(a.inputs.size(), b.inputs.size()) << p.name;
    for (size_t i = 0; i < a.inputs.size(); ++i) EXPECT_TRUE(a.inputs[i].equals(b.inputs[i]));
    EXPECT_NE(a.model.SerializeAsString() + a.inputs[0].shape().to_string(),
              c.model.SerializeAsString() + c.inputs[0].shape().to_string())
        << p.name;
  }
}

TEST(DifferentialCompare, ToleranceFollowsTheRange) {
  Tensor ref(DType::kF32, Shape{4});
  Tensor got(DType::kF32, Shape{4});
  const float values[] = {0.9f, 0.05f, 0.04f, 0.01f};  // a softmax
  for (int i = 0; i < 4; ++i) ref.data<float>()[i] = got.data<float>()[i] = values[i];
  got.data<float>()[3] += 5e-5f;  // within 1e-4 of the range
  EXPECT_TRUE(compare(ref, got, Tolerance{}).ok);
  got.data<float>()[3] = 0.6f;  // off by 0.59, as the recognizer's softmax was
  const Comparison c = compare(ref, got, Tolerance{});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.worst, 3);
  EXPECT_EQ(c.bad, 1);
  EXPECT_NEAR(c.range, 0.9, 1e-6);
  EXPECT_EQ(index_string(Shape{2, 3}, 4), "[1,1]");
}

TEST(DifferentialCompare, NonFiniteAndIntegerValuesMatchExactly) {
  Tensor ref(DType::kF32, Shape{3});
  Tensor got(DType::kF32, Shape{3});
  ref.data<float>()[0] = got.data<float>()[0] = std::nanf("");
  ref.data<float>()[1] = got.data<float>()[1] = INFINITY;
  ref.data<float>()[2] = got.data<float>()[2] = 1.0f;
  EXPECT_TRUE(compare(ref, got, Tolerance{}).ok);
  got.data<float>()[1] = 3e38f;
  EXPECT_FALSE(compare(ref, got, Tolerance{}).ok);
  Tensor a(DType::kI64, Shape{2});
  Tensor b(DType::kI64, Shape{2});
  a.data<int64_t>()[0] = b.data<int64_t>()[0] = 1000000;
  a.data<int64_t>()[1] = 5;
  b.data<int64_t>()[1] = 6;
  EXPECT_FALSE(compare(a, b, Tolerance{}).ok);
  EXPECT_FALSE(compare(a, Tensor(DType::kI64, Shape{3}), Tolerance{}).ok);
}

TEST(DifferentialConfigs, ConvModelsRunEveryKernelChoice) {
  const Case conv = make_case(*find_pattern("winograd"), 0);
  const Case attention = make_case(*find_pattern("attention"), 0);
  std::vector<Config> configs = configs_for("cpu", conv.model, false);
  ASSERT_EQ(configs.size(), 9u);
  EXPECT_EQ(configs[0].env_string(),
            "KILN_CPU_INTERPRET=1 KILN_CPU_CONV_LAYOUT=auto KILN_CPU_CONV1X1=auto "
            "KILN_CPU_WINOGRAD=auto KILN_CPU_STEM=auto");
  EXPECT_EQ(configs_for("cpu", conv.model, true).size(), 2u + 3 * 3 * 3 * 2 - 1);
  EXPECT_EQ(configs_for("cpu", attention.model, false).size(), 2u);
  EXPECT_FALSE(configs_for("cuda", conv.model, false).empty());
}

TEST(DifferentialConfigs, UnavailableTargetsSayWhy) {
  const Status bogus = target_available("tpu");
  EXPECT_EQ(bogus.code(), StatusCode::kNotFound);
  EXPECT_NE(bogus.message().find("tpu"), std::string::npos);
  const Status cuda = target_available("cuda");
  if (!cuda.ok()) {
    EXPECT_NE(cuda.message().find("cuda"), std::string::npos) << cuda.message();
  }
}

// Every pattern, eight seeds each, under every configuration of the cpu target (and each
// configuration's artifact loaded under it and under the next).
class DifferentialCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(DifferentialCpu, AgreesWithRef) {
  if (!has_cpu()) GTEST_SKIP() << "this build has no cpu target";
  expect_agree(GetParam(), 0, 8);
}

std::vector<std::string> pattern_names() {
  std::vector<std::string> names;
  for (const Pattern& p : patterns()) names.emplace_back(p.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Patterns, DifferentialCpu, ::testing::ValuesIn(pattern_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kiln::differential
