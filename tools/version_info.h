// SPDX-License-Identifier: Apache-2.0
// `kiln --version`: the version and the facts of the build (git commit, build type, compiler,
// CUDA, oneDNN, targets), as text or as one JSON object.
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

struct BuildFacts {
  std::string version;               // "0.1.0"
  std::string git_commit;            // the commit built, or "unknown" (no git, a source tarball)
  bool git_dirty = false;            // tracked files differed from the commit when it was built
  std::string build_type;            // CMAKE_BUILD_TYPE, e.g. "RelWithDebInfo"
  std::string compiler;              // "gcc 12.2.0", "clang 14.0.6"
  bool cuda = false;                 // built with the CUDA parts
  std::string cuda_toolkit;          // the toolkit's version when `cuda`, else empty
  std::string onednn;                // the oneDNN library in use, e.g. "2.7.3"; empty without it
  std::vector<std::string> targets;  // compiled in: "ref", "cpu", "cuda"
  std::vector<std::string> usable;   // of those, the ones this machine can run (cuda needs a GPU)
};

BuildFacts build_facts();

// "kiln 0.1.0" on the first line, then one "  key: value" line per fact.
std::string version_text(const BuildFacts& facts);

// {"version": ..., "git_commit": ..., "git_dirty": ..., ...} on one line.
std::string version_json(const BuildFacts& facts);

}  // namespace kiln::tools
