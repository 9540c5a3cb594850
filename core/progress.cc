// SPDX-License-Identifier: Apache-2.0
// The terminal progress bar.
#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace kiln {

namespace {
constexpr int kBarWidth = 30;
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
