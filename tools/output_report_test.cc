// SPDX-License-Identifier: Apache-2.0
// Tests for `kiln run`'s top classes and JSON outputs.
#include "tools/output_report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kiln::tools {
namespace {

Tensor rows_of(std::vector<float> values, int64_t rows) {
  Tensor t(DType::kF32, Shape({rows, static_cast<int64_t>(values.size()) / rows}));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

TEST(OutputReport, TopClassesPerRowLargestFirstTiesByIndex) {
  const Tensor t = rows_of({0.1f, 3.0f, -1.0f, 3.0f, 2.0f, 5.0f, 0.0f, 1.0f}, 2);
  const auto top = top_classes(t, 2);
  ASSERT_EQ(top.size(), 2u);
  ASSERT_EQ(top[0].size(), 2u);
  EXPECT_EQ(top[0][0].index, 1);
  EXPECT_EQ(top[0][1].index, 3);
  EXPECT_DOUBLE_EQ(top[0][0].score, 3.0);
  EXPECT_EQ(top[1][0].index, 1);
  EXPECT_EQ(top[1][1].index, 0);
  EXPECT_EQ(top_classes_text("logits", top),
            "logits[0]: classes 1 (3), 3 (3)\nlogits[1]: classes 1 (5), 0 (2)\n");
  EXPECT_EQ(top_classes_text("logits", top_classes(rows_of({0.5f, -2.25f, 9.5f}, 1), 1)),
            "logits: class 2 (score 9.5)\n");
}

TEST(OutputReport, NoTopClassesForScalarsOrOneWideRowsOrKZero) {
  EXPECT_TRUE(top_classes(rows_of({1.0f, 2.0f}, 2), 1).empty());  // [2, 1]
  EXPECT_TRUE(top_classes(rows_of({1.0f, 2.0f}, 1), 0).empty());
  EXPECT_TRUE(top_classes(Tensor(DType::kF32, Shape{}), 1).empty());
  // k past the row's width gives the whole row.
  EXPECT_EQ(top_classes(rows_of({1.0f, 2.0f}, 1), 5)[0].size(), 2u);
}

TEST(OutputReport, JsonHasDtypeShapeValuesAndTop) {
  JsonWriter j;
  output_json(j, "logits", compiler::Argument(rows_of({0.25f, 1.5f, -3.0f}, 1)), 1);
  EXPECT_EQ(j.str(),
            "{\"name\":\"logits\",\"dtype\":\"f32\",\"shape\":[1,3],\"values\":[0.25,1.5,-3],"
            "\"top\":[[{\"class\":1,\"score\":1.5}]]}\n");
}

TEST(OutputReport, JsonLeavesOutTheValuesOfALargeOutput) {
  JsonWriter j;
  output_json(j, "big", compiler::Argument(Tensor(DType::kI64, Shape({kMaxJsonValues + 1}))), 0);
  EXPECT_EQ(j.str(), fmt::format("{{\"name\":\"big\",\"dtype\":\"i64\",\"shape\":[{}],"
                                 "\"values\":null}}\n",
                                 kMaxJsonValues + 1));
}

}  // namespace
}  // namespace kiln::tools
