// SPDX-License-Identifier: Apache-2.0
// Tests for the CLI's JSON writer.
#include "tools/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::tools {
namespace {

TEST(JsonWriter, WritesNestedObjectsArraysAndEscapedStrings) {
  JsonWriter j;
  j.begin_object()
      .field("name", "a \"quoted\"\\path\n")
      .field("count", 3)
      .field("big", uint64_t{18446744073709551615u})
      .field("negative", int64_t{-5})
      .field("ok", true)
      .field("dims", std::vector<int64_t>{1, 10})
      .field("names", std::vector<std::string>{"x", "y"});
  j.key("rows").begin_array().begin_object().field("class", 7).end_object().end_array();
  j.key("none").null().end_object();
  EXPECT_EQ(j.str(),
            "{\"name\":\"a \\\"quoted\\\"\\\\path\\n\",\"count\":3,\"big\":18446744073709551615,"
            "\"negative\":-5,\"ok\":true,\"dims\":[1,10],\"names\":[\"x\",\"y\"],"
            "\"rows\":[{\"class\":7}],\"none\":null}\n");
}

TEST(JsonWriter, FloatsAreShortestAndNonFiniteNumbersAreNull) {
  JsonWriter j;
  j.begin_array()
      .value(0.1f)
      .value(0.5)
      .value(-2.0f)
      .value(std::numeric_limits<double>::quiet_NaN())
      .value(std::numeric_limits<float>::infinity())
      .value(1e-5f)
      .end_array();
  EXPECT_EQ(j.str(), "[0.1,0.5,-2,null,null,1e-05]\n");
}

}  // namespace
}  // namespace kiln::tools
