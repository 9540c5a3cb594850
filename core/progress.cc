// SPDX-License-Identifier: Apache-2.0
// The terminal progress bar.
#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace kiln {

namespace {
constexpr int kBarWidth = 30;

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
ProgressSink& sink() {
  static ProgressSink s;
  return s;
}
}  // namespace

void set_progress_sink(ProgressSink s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  sink() = std::move(s);
}

void report_progress(std::string_view label, int64_t done, int64_t total) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) sink()(label, done, total);
}

ProgressSink terminal_progress_sink(std::FILE* stream) {
  struct State {
    std::string label;
    std::unique_ptr<ProgressBar> bar;
  };
  auto state = std::make_shared<State>();
  return [state, stream](std::string_view label, int64_t done, int64_t total) {
    if (state->bar == nullptr || state->label != label) {
      state->label = std::string(label);
      state->bar = std::make_unique<ProgressBar>(state->label, stream);
    }
    state->bar->update(done, total);
    if (done >= total) state->bar.reset();
  };
}

ProgressBar::ProgressBar(std::string label, std::FILE* stream)
    : label_(std::move(label)),
      stream_(stream),
      interactive_(stream != nullptr && isatty(fileno(stream)) != 0),
      start_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::render(int64_t done, int64_t total, double seconds) const {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarWidth) {
    bar += '>';
    bar.append(static_cast<size_t>(kBarWidth - filled - 1), ' ');
  }
  return fmt::format("{} [{}] {}/{}  {:.1f} s", label_, bar, done, total, seconds);
}

void ProgressBar::update(int64_t done, int64_t total) {
  if (stream_ == nullptr) return;
  const bool finished = done >= total;
  if (!interactive_ && !finished) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stream_, "{}{}{}", interactive_ ? "\r" : "", render(done, total, seconds),
             finished ? "\n" : "");
  std::fflush(stream_);
}

}  // namespace kiln
