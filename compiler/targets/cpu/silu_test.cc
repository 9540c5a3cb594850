// SPDX-License-Identifier: Apache-2.0
// silu_f32() against x / (1 + exp(-x)) in double precision, over every length's vector tail;
// pool16_f32() against per-channel means of the same, over one- and many-thread block splits.
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

// pool16_f32 over `blocks` nChw16c channel blocks of `pixels` pixels, against double sums.
void expect_pool(size_t blocks, size_t pixels, bool with_silu) {
  std::mt19937 rng(static_cast<unsigned>(blocks * 1000 + pixels));
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  std::vector<float> x(blocks * pixels * 16);
  for (float& v : x) v = dist(rng);
  std::vector<float> y = x;
  std::vector<float> pooled(blocks * 16, -1.0f);
  pool16_f32(y.data(), blocks, pixels, with_silu, pooled.data());
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t lane = 0; lane < 16; ++lane) {
      double sum = 0.0;
      for (size_t p = 0; p < pixels; ++p) {
        const size_t i = (b * pixels + p) * 16 + lane;
        const double want = with_silu ? silu(x[i]) : x[i];
        ASSERT_NEAR(y[i], want, 2e-6 * std::abs(want) + 1e-30) << "element " << i;
        sum += want;
      }
      const double mean = sum / static_cast<double>(pixels);
      EXPECT_NEAR(pooled[b * 16 + lane], mean, 1e-5 * (1.0 + std::abs(mean)))
          << "block " << b << " lane " << lane << " of " << blocks << " x " << pixels;
    }
  }
}

TEST(Silu, PoolsChannelMeansInTheSamePass) {
  if (!has_fast_silu()) GTEST_SKIP() << "no AVX-512 here";
  for (bool with_silu : {true, false}) {
    SCOPED_TRACE(with_silu ? "silu" : "identity");
    expect_pool(1, 1, with_silu);      // one vector
    expect_pool(3, 49, with_silu);     // one thread: under two chunks
    expect_pool(72, 49, with_silu);    // EfficientNet's 7x7x1152: blocks split over threads
    expect_pool(2, 12544, with_silu);  // 112x112x32: blocks split into parts
    expect_pool(5, 257, with_silu);    // parts with a short last one
  }
}

}  // namespace
}  // namespace kiln::compiler::cpu
