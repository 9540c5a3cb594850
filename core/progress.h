// SPDX-License-Identifier: Apache-2.0
// Progress: a callback libraries report long loops through, and a terminal bar hosts draw with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace kiln {

// What a long-running library loop (calibration, tuning) reports after each step: `done` of
// `total` steps finished. Libraries never print; the host decides how to show it.
using ProgressCallback = std::function<void(int64_t done, int64_t total)>;

// A one-line progress bar on a terminal stream: "calibrating [=====>     ] 12/32  1.4 s". It
// redraws in place when the stream is a terminal and prints only the final line otherwise (logs,
// CI), so piped output stays readable. Not thread-safe: update it from one thread.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label, std::FILE* stream = stderr);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Draws `done` of `total`; the line is finished (newline) when done == total.
  void update(int64_t done, int64_t total);
  // update() as a ProgressCallback; the bar must outlive the callback's uses.
  ProgressCallback callback() {
    return [this](int64_t done, int64_t total) { update(done, total); };
  }
  // The line update() would draw, without the carriage return: for tests.
  std::string render(int64_t done, int64_t total, double seconds) const;

 private:
  std::string label_;
  std::FILE* stream_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kiln
