// SPDX-License-Identifier: Apache-2.0
// Small string helpers shared across parts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The non-empty items of a comma-separated list ("a,,b" gives a and b).
inline std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace kiln
