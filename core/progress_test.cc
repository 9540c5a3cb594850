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

std::string contents(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[256];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  return text;
}

TEST(ProgressSink, NothingWithoutASink) {
  set_progress_sink(nullptr);
  report_progress("tuning", 1, 2);  // no sink: dropped, no crash
  int calls = 0;
  set_progress_sink([&](std::string_view label, int64_t done, int64_t total) {
    EXPECT_EQ(label, "tuning");
    EXPECT_EQ(done, 3);
    EXPECT_EQ(total, 7);
    ++calls;
  });
  report_progress("tuning", 3, 7);
  set_progress_sink(nullptr);
  report_progress("tuning", 4, 7);
  EXPECT_EQ(calls, 1);
}

TEST(ProgressSink, TerminalSinkDrawsABarPerLoop) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  set_progress_sink(terminal_progress_sink(file));
  for (int i = 1; i <= 3; ++i) report_progress("cuda: tuning", i, 3);
  report_progress("calibrating", 1, 2);
  report_progress("calibrating", 2, 2);
  report_progress("cuda: tuning", 5, 5);  // a second compile's loop: a bar of its own
  set_progress_sink(nullptr);
  const std::string text = contents(file);
  std::fclose(file);
  // Not a terminal: the final line of each loop only.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  EXPECT_EQ(text.rfind("cuda: tuning [==============================] 3/3", 0), 0u) << text;
  EXPECT_NE(text.find("\ncalibrating [==============================] 2/2"), std::string::npos);
  EXPECT_NE(text.find("\ncuda: tuning [==============================] 5/5"), std::string::npos);
}

}  // namespace
}  // namespace kiln
