// SPDX-License-Identifier: Apache-2.0
// The facts `kiln --version` reports. The only file that includes the generated git_info.h, so a
// new commit recompiles this file alone.
#include "tools/version_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/artifact/fingerprint.h"
#include "compiler/targets/target.h"
#include "core/strings.h"
#include "tools/build_info.h"
#include "tools/git_info.h"
#include "tools/json_writer.h"
#include "tools/version.h"

namespace kiln::tools {

namespace {

std::string compiler_name() {
#if defined(__clang__)
  return fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

}  // namespace

BuildFacts build_facts() {
  BuildFacts f;
  f.version = KILN_VERSION_STRING;
  f.git_commit = KILN_GIT_COMMIT;
  f.git_dirty = KILN_GIT_DIRTY;
  f.build_type = KILN_BUILD_TYPE;
  f.compiler = compiler_name();
  f.cuda = KILN_BUILD_CUDA;
  f.cuda_toolkit = KILN_BUILD_CUDA_TOOLKIT;
  for (const auto& [key, value] : compiler::device_fingerprint("cpu")) {
    if (key == "onednn") f.onednn = value;
  }
  f.targets = split_commas(KILN_BUILD_TARGETS);
  const std::vector<std::string> usable = compiler::target_names();
  for (const std::string& t : f.targets) {
    if (std::find(usable.begin(), usable.end(), t) != usable.end()) f.usable.push_back(t);
  }
  return f;
}

std::string version_text(const BuildFacts& f) {
  std::string out = fmt::format("kiln {}\n", f.version);
  out += fmt::format("  commit: {}{}\n", f.git_commit,
                     f.git_dirty ? " (with uncommitted changes to tracked files)" : "");
  out += fmt::format("  build: {}, {}\n", f.build_type.empty() ? "(no type)" : f.build_type,
                     f.compiler);
  out += fmt::format("  cuda: {}\n", f.cuda ? "on, toolkit " + f.cuda_toolkit : "off");
  out += fmt::format("  onednn: {}\n", f.onednn.empty() ? "none" : f.onednn);
  std::string targets;
  for (const std::string& t : f.targets) {
    const bool can_run = std::find(f.usable.begin(), f.usable.end(), t) != f.usable.end();
    targets += fmt::format("{}{}{}", targets.empty() ? "" : ", ", t,
                           can_run ? "" : " (not usable here: no GPU)");
  }
  out += fmt::format("  targets: {}\n", targets);
  return out;
}

std::string version_json(const BuildFacts& f) {
  JsonWriter j;
  j.begin_object()
      .field("version", f.version)
      .field("git_commit", f.git_commit)
      .field("git_dirty", f.git_dirty)
      .field("build_type", f.build_type)
      .field("compiler", f.compiler)
      .field("cuda", f.cuda);
  j.key("cuda_toolkit");
  if (f.cuda) {
    j.value(f.cuda_toolkit);
  } else {
    j.null();
  }
  j.key("onednn");
  if (f.onednn.empty()) {
    j.null();
  } else {
    j.value(f.onednn);
  }
  j.field("targets", f.targets).field("usable_targets", f.usable).end_object();
  return j.str();
}

}  // namespace kiln::tools
