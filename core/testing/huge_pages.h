// SPDX-License-Identifier: Apache-2.0
// Tests' helpers: the kernel's transparent huge page mode, and how much of a mapping it backs with
// huge pages (/proc/self/smaps).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::test {

// "always", "madvise" or "never" (the bracketed word of the sysfs file); "" where it is missing.
inline std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('[');
  const size_t close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// Whether madvise(MADV_HUGEPAGE) gets huge pages here.
inline bool thp_available() {
  const std::string mode = thp_mode();
  return mode == "always" || mode == "madvise";
}

// AnonHugePages of the mapping holding `p`, in KiB; -1 when no mapping holds it.
inline int64_t huge_kib_at(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  bool found = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      found = found || inside;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stoll(line.substr(std::strlen("AnonHugePages:")));
    }
  }
  return found ? 0 : -1;
}

}  // namespace kiln::test
