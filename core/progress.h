// SPDX-License-Identifier: Apache-2.0
// Progress: a callback libraries report long loops through (or a sink the host installs, for loops
// deep inside a call), and a terminal bar hosts draw with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

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

// Where progress goes for a library loop no callback reaches (a target tuning inside compile()):
// the host installs it, as it installs the log sink; `label` names the loop ("cuda: tuning").
// Without one, progress is not shown (the server, the Python package).
using ProgressSink = std::function<void(std::string_view label, int64_t done, int64_t total)>;

// Installs the sink (an empty function removes it). Thread-safe; the sink is called under a lock,
// one report at a time.
void set_progress_sink(ProgressSink sink);
// What a library calls after each step of a loop labelled `label`: `done` of `total` finished.
// A loop that ends early reports (total, total) to finish it.
void report_progress(std::string_view label, int64_t done, int64_t total);

// A sink that draws a ProgressBar on `stream` per loop: a new bar when the label changes or the
// last one finished. For CLIs: set_progress_sink(terminal_progress_sink()).
ProgressSink terminal_progress_sink(std::FILE* stream = stderr);

}  // namespace kiln
