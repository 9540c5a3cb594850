// SPDX-License-Identifier: Apache-2.0
// The progress bar's line and its non-terminal behaviour.
#include "core/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace kiln {
namespace {

TEST(ProgressBar, RendersFractionAndCounts) {
  ProgressBar bar("calibrating", nullptr);
  EXPECT_EQ(bar.render(0, 4, 0.0), "calibrating [>                             ] 0/4  0.0 s");
  EXPECT_EQ(bar.render(2, 4, 1.25), "calibrating [===============>              ] 2/4  1.2 s");
  EXPECT_EQ(bar.render(4, 4, 2.0), "calibrating [==============================] 4/4  2.0 s");
}

TEST(ProgressBar, WritesOnlyTheFinalLineToAFile) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressBar bar("batches", file);
    ProgressCallback report = bar.callback();
    for (int i = 1; i <= 3; ++i) report(i, 3);
  }
  std::rewind(file);
  char buffer[256] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  const std::string text(buffer, n);
  EXPECT_EQ(text.rfind("batches [==============================] 3/3", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

}  // namespace
}  // namespace kiln
