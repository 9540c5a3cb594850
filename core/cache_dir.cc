// SPDX-License-Identifier: Apache-2.0
// The cache root from KILN_CACHE_DIR and the XDG base directory rules.
#include "core/cache_dir.h"

#include <cstdlib>
#include <string>

#include "core/env.h"

namespace kiln {

std::filesystem::path cache_root() {
  namespace fs = std::filesystem;
  const std::string kiln_dir = env_flag_string(EnvFlag::kCacheDir);
  if (!kiln_dir.empty()) return fs::path(kiln_dir);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return fs::path(xdg) / "kiln";
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".cache" / "kiln";
}

}  // namespace kiln
