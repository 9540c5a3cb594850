// SPDX-License-Identifier: Apache-2.0
// Calibration thresholds on distributions whose answers are known.
#include "compiler/quantize/calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "compiler/ir/graph.h"

namespace kiln::compiler {
namespace {

std::vector<float> normal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(RangeObserver, UniformValuesKeepTheirRange) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(200000);
  for (float& x : v) x = dist(rng);
  RangeObserver o;
  o.observe(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_NEAR(o.max_abs(), 1.0, 1e-3);
  EXPECT_LT(o.min(), -0.999);
  EXPECT_NEAR(o.percentile(50), 0.5, 0.01);
  EXPECT_NEAR(o.percentile(99), 0.99, 0.01);
  // Nothing to clip in a uniform distribution: entropy keeps (nearly) the whole range.
  EXPECT_GT(o.entropy_threshold(128), 0.9);
}

// Ranges alone (what Executable::run_ranges gives) give the max method what the values give.
TEST(RangeObserver, RangesGiveTheMaxMethodWhatTheValuesGive) {
  RangeObserver values, ranges;
  for (uint64_t batch = 0; batch < 3; ++batch) {
    std::vector<float> v = normal(5000, 10 + batch);
    for (float& x : v) x = x * static_cast<float>(batch + 1) + 0.5f;
    values.observe(v.data(), static_cast<int64_t>(v.size()));
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    ranges.observe_range(*lo, *hi, static_cast<int64_t>(v.size()));
  }
  EXPECT_EQ(ranges.count(), values.count());
  EXPECT_EQ(ranges.min(), values.min());
  EXPECT_EQ(ranges.max(), values.max());
  EXPECT_EQ(ranges.threshold(CalibrationMethod::kMax, 99.9, 128),
            values.threshold(CalibrationMethod::kMax, 99.9, 128));
  EXPECT_GT(ranges.max_abs(), 3.0);
}

TEST(RangeObserver, PercentileAndEntropyClipAnOutlier) {
  std::vector<float> v = normal(1000000, 7);
  v.push_back(100.0f);
  RangeObserver o;
  o.observe(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_FLOAT_EQ(o.threshold(CalibrationMethod::kMax, 0, 128), 100.0);
  // |N(0,1)| has its 99.99th percentile at 3.89; bins are 100/2048 wide.
  EXPECT_NEAR(o.threshold(CalibrationMethod::kPercentile, 99.99, 128), 3.89, 0.1);
  const double entropy = o.threshold(CalibrationMethod::kEntropy, 0, 128);
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 10.0);
}

// A few thousand values (a small model's last layer over a hundred calibration images) cannot
// fill 2,048 bins: entropy then keeps the whole range instead of a clip chosen on noise.
TEST(RangeObserver, EntropyOnFewValuesKeepsTheRange) {
  std::vector<float> v = normal(4096, 3);
  for (float& x : v) x = std::abs(x);
  RangeObserver few;
  few.observe(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_DOUBLE_EQ(few.threshold(CalibrationMethod::kEntropy, 0, 256), few.max_abs());
  // With enough values per bin it clips as before.
  std::vector<float> many = normal(1000000, 4);
  for (float& x : many) x = std::abs(x);
  many.push_back(60.0f);
  RangeObserver o;
  o.observe(many.data(), static_cast<int64_t>(many.size()));
  EXPECT_LT(o.threshold(CalibrationMethod::kEntropy, 0, 256), 10.0);
}

TEST(RangeObserver, GrowingRangeMergesBinsWithoutLosingCounts) {
  RangeObserver o(16);
  std::vector<float> first = {0.1f, 0.5f, 0.9f, 1.0f};
  std::vector<float> second = {-3.0f, 2.5f};
  o.observe(first.data(), 4);
  EXPECT_DOUBLE_EQ(o.range(), 1.0);
  o.observe(second.data(), 2);
  EXPECT_DOUBLE_EQ(o.range(), 4.0);  // doubled twice
  double total = 0;
  for (double c : o.histogram()) total += c;
  EXPECT_DOUBLE_EQ(total, 6.0);
  EXPECT_EQ(o.count(), 6);
  EXPECT_DOUBLE_EQ(o.min(), -3.0);
  EXPECT_DOUBLE_EQ(o.max(), 2.5);
  // After two merges the bins are 0.25 wide: 0.1 is in bin 0, 0.5 in bin 2, 0.9 and 1.0 in
  // bin 3; the second batch's 3.0 lands in bin 12.
  EXPECT_DOUBLE_EQ(o.histogram()[0], 1.0);
  EXPECT_DOUBLE_EQ(o.histogram()[2], 1.0);
  EXPECT_DOUBLE_EQ(o.histogram()[3], 2.0);
  EXPECT_DOUBLE_EQ(o.histogram()[12], 1.0);
}

TEST(RangeObserver, AllZerosGiveAZeroThreshold) {
  std::vector<float> zeros(100, 0.0f);
  RangeObserver o;
  o.observe(zeros.data(), 100);
  EXPECT_EQ(o.threshold(CalibrationMethod::kEntropy, 0, 128), 0.0);
  EXPECT_EQ(o.threshold(CalibrationMethod::kPercentile, 99.9, 128), 0.0);
}

TEST(CalibrationMethod, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*parse_calibration_method("entropy"), CalibrationMethod::kEntropy);
  Result<CalibrationMethod> bad = parse_calibration_method("minmax");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max, percentile or entropy"), std::string::npos);
}

// A graph of one input x[batch, 3] (batch fixed at `batch`, or named when 0).
std::shared_ptr<Graph> one_input(int64_t batch) {
  auto g = std::make_shared<Graph>("g");
  std::vector<Dim> dims = {batch > 0 ? Dim(batch) : Dim::symbolic("n"), Dim(3)};
  Value* x = g->add_input("x", ValueType(TensorType(DType::kF32, dims)));
  g->add_output(x);
  return g;
}

CalibrationBatch samples(int64_t count, float first) {
  Tensor t(DType::kF32, Shape{count, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + static_cast<float>(i);
  return {{"x", t}};
}

TEST(Rebatch, JoinsAndCutsSamplesToTheCompileBatch) {
  // Five files of one sample (values 0..2, 100..102, ...) for a model of batch 2: two batches.
  std::vector<CalibrationBatch> files;
  for (int i = 0; i < 5; ++i) files.push_back(samples(1, 100.0f * static_cast<float>(i)));
  Result<std::vector<CalibrationBatch>> out = rebatch_calibration(*one_input(2), files);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  const Tensor& second = (*out)[1].at("x");
  EXPECT_EQ(second.shape(), (Shape{2, 3}));
  EXPECT_EQ(second.data<float>()[0], 200.0f);
  EXPECT_EQ(second.data<float>()[5], 302.0f);
  // One file of 4 samples for batch 2: split in two.
  out = rebatch_calibration(*one_input(2), {samples(4, 0)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[1].at("x").data<float>()[0], 6.0f);
}

TEST(Rebatch, KeepsDynamicAndMatchingBatchesAndSaysWhatIsMissing) {
  std::vector<CalibrationBatch> files = {samples(1, 0), samples(3, 0)};
  Result<std::vector<CalibrationBatch>> same = rebatch_calibration(*one_input(0), files);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[1].at("x").shape(), (Shape{3, 3}));
  Result<std::vector<CalibrationBatch>> few = rebatch_calibration(*one_input(8), files);
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("input \"x\" takes batches of 8 (the compile batch); "
                                        "the calibration data holds 4 samples in all"),
            std::string::npos)
      << few.status().message();
  Result<std::vector<CalibrationBatch>> wide = rebatch_calibration(
      *one_input(2), {{{"x", Tensor(DType::kF32, Shape{1, 4})}}, samples(2, 0)});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("calibration batch 0: input \"x\" is f32[1,4]"),
            std::string::npos)
      << wide.status().message();
}

}  // namespace
}  // namespace kiln::compiler
