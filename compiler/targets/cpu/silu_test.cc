// SPDX-License-Identifier: Apache-2.0
// silu_f32() against x / (1 + exp(-x)) in double precision, over every length's vector tail.
#include "compiler/targets/cpu/silu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kiln::compiler::cpu {
namespace {

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

void expect_silu(std::vector<float> x) {
  std::vector<float> y = x;
  silu_f32(y.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = silu(x[i]);
    ASSERT_NEAR(y[i], want, 2e-6 * std::abs(want) + 1e-30) << "x = " << x[i] << " at " << i;
  }
}

TEST(Silu, MatchesTheDefinitionOverEveryRange) {
  if (!has_fast_silu()) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  std::vector<float> x(3 * 4096 + 37);  // several chunks and a vector tail
  for (float& v : x) v = dist(rng);
  expect_silu(x);
}

TEST(Silu, ShortTailsAndExtremes) {
  if (!has_fast_silu()) GTEST_SKIP() << "no AVX-512 here";
  for (size_t n = 1; n <= 33; ++n) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.37f - 5.0f;
    expect_silu(x);
  }
  std::vector<float> y = {-1000.0f, -90.0f, -88.5f, 0.0f, -0.0f, 1e-30f, 90.0f, 1000.0f};
  silu_f32(y.data(), y.size());
  EXPECT_NEAR(y[0], 0.0f, 1e-30f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_FLOAT_EQ(y[5], 0.5e-30f);
  EXPECT_EQ(y[6], 90.0f);
  EXPECT_EQ(y[7], 1000.0f);
  for (float v : y) EXPECT_FALSE(std::isnan(v));
}

}  // namespace
}  // namespace kiln::compiler::cpu
