// SPDX-License-Identifier: Apache-2.0
// The cpu target bugs the differential tester found, each as the smallest model that showed it,
// run on ref and on the cpu target under every lowering configuration.
#include <gtest/gtest.h>

#include <functional>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"
#include "tests/differential/runner.h"

namespace kiln::differential {
namespace {

// Builds a case from `build` (inputs drawn from a fixed seed) and expects every configuration of
// the cpu target to agree with ref.
void expect_agree(const std::function<void(OnnxGraph&)>& build, RunnerOptions options = {}) {
  if (!target_available("cpu").ok()) GTEST_SKIP() << "this build has no cpu target";
  Rng rng(1);
  OnnxGraph g(rng, 17);
  build(g);
  Case c;
  c.pattern = "regression";
  c.model = g.model();
  c.input_names = g.input_names();
  c.inputs = g.input_values();
  c.second_inputs = g.second_input_values();
  const CaseResult r = run_case(c, options);
  ASSERT_TRUE(r.invalid.empty()) << r.invalid;
  EXPECT_GT(r.configs, 1);
  for (const Failure& f : r.failures) ADD_FAILURE() << describe(c, f, options);
}

ConvSpec conv3x3(int64_t out) {
  ConvSpec s;
  s.out = out;
  s.pads = {1, 1, 1, 1};
  return s;
}

// The own Winograd F(4x4, 3x3) over 58x58 has 225 tiles; 16 threads asked for ranges of 15 tiles
// in 16 parts, the last empty, and the products divided by its zero tiles (SIGFPE). Found as
// `differential_runner --pattern large --threads 16`, seed 48.
TEST(DifferentialRegression, OwnWinogradWithMoreThreadsThanTileRanges) {
  RunnerOptions options;
  options.threads = 16;
  expect_agree(
      [](OnnxGraph& g) {
        const std::string x = g.node("Relu", {conv(g, g.input({1, 1, 58, 58}), conv3x3(128))});
        g.output(g.node("Relu", {conv(g, x, conv3x3(64))}));
      },
      options);
}

// An artifact stores the weights oneDNN packed in oneDNN's layout. Loaded under other lowering
// choices (KILN_CPU_STEM, KILN_CPU_WINOGRAD, KILN_CPU_CONV1X1), the own kernels read those packed
// bytes as plain weights: every output wrong by its whole range. run_case loads each
// configuration's artifact under the next configuration too, which covers these three: compiled
// with the stem on oneDNN and loaded with the own stem, compiled with oneDNN's Winograd (or 1x1)
// and loaded with the own one. Found by the artifact round trip of every pattern (the recognizer
// and detector patterns failed 9 cases in 10).
TEST(DifferentialRegression, OwnStemReadsPlainWeightsOfAnArtifactPackedForOneDnn) {
  expect_agree([](OnnxGraph& g) {
    ConvSpec s;
    s.out = 32;
    s.kernel = {7, 7};
    s.strides = {2, 2};
    s.pads = {3, 3, 3, 3};
    g.output(g.node("Relu", {conv(g, g.input({1, 3, 32, 32}), s)}));
  });
}

TEST(DifferentialRegression, OwnWinogradReadsPlainWeightsOfAnArtifactPackedForOneDnn) {
  expect_agree([](OnnxGraph& g) {
    const std::string x = g.node("Relu", {conv(g, g.input({1, 3, 14, 14}), conv3x3(32))});
    g.output(g.node("Relu", {conv(g, x, conv3x3(64))}));
  });
}

TEST(DifferentialRegression, OwnConvOverTapsReadsPlainWeightsOfAnArtifactPackedForOneDnn) {
  expect_agree([](OnnxGraph& g) {
    const std::string x = g.node("Relu", {conv(g, g.input({1, 3, 7, 7}), conv3x3(32))});
    g.output(g.node("Relu", {conv(g, x, conv3x3(256))}));
  });
}

// A Slice with a step that does not divide its dim (every other of 5 columns) was made a view with
// strides oneDNN refuses to describe (3 columns 2 apart under rows 5 apart); the dnnl::error
// escaped ProgramBuilder::build and aborted the process. Found as `--pattern slice`, seed 103.
TEST(DifferentialRegression, SliceWithAStepThatDoesNotDivideItsDimIsNoView) {
  expect_agree([](OnnxGraph& g) {
    const std::string x = g.input({1, 8, 5, 5});
    g.output(g.node("Slice", {x, g.ints({0}), g.ints({5}), g.ints({3}), g.ints({2})}));
    const std::string y = g.node("Relu", {conv(g, g.input({1, 3, 7, 7}), conv3x3(16))});
    g.output(g.node("Slice", {y, g.ints({1, 0}), g.ints({7, 7}), g.ints({2, 3}), g.ints({3, 2})}));
  });
}

// oneDNN 2.6's brgemm kernels apply every eltwise post-op of one algorithm with the parameters of
// the first: MatMul then LeakyRelu(0.2) then Relu came out as LeakyRelu(0.2) twice (negative
// values where Relu gives 0), a Conv's own Relu then its residual sum then LeakyRelu(0.1) as Relu
// twice, two scales as the first twice. Found as `--pattern eltwise`, seed 234.
TEST(DifferentialRegression, PostOpsOfOneAlgorithmWithOtherParametersAreNotChained) {
  expect_agree([](OnnxGraph& g) {
    const std::string x = g.input({3, 6, 22});
    const std::string y = g.node("MatMul", {x, g.weight({22, 33}, 0.3f)});
    g.output(g.node("Relu", {g.node("LeakyRelu", {y}, {af("alpha", 0.2f)})}));
  });
  expect_agree([](OnnxGraph& g) {
    const std::string x = g.input({1, 16, 6, 6});
    const std::string r = g.node("Relu", {conv(g, x, conv3x3(16))});
    const std::string sum = g.node("Add", {g.node("Relu", {conv(g, r, conv3x3(16))}), r});
    g.output(g.node("LeakyRelu", {sum}, {af("alpha", 0.1f)}));
  });
  expect_agree([](OnnxGraph& g) {
    const std::string y = conv(g, g.input({1, 8, 5, 5}), conv3x3(24));
    g.output(g.node("Mul", {g.node("Mul", {y, g.scalar(2.0f)}), g.scalar(-1.5f)}));
  });
}

}  // namespace
}  // namespace kiln::differential
