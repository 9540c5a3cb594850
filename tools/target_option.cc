// SPDX-License-Identifier: Apache-2.0
// Choosing the target of a command: --target, $KILN_TARGET, or the build's default.
#include "tools/target_option.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/targets/target.h"
#include "core/env.h"

namespace kiln::tools {

void add_target_option(CLI::App* cmd, TargetOption* target, const std::string& what) {
  // Not compiler::target_names(): it asks the CUDA driver for GPUs, which every kiln command
  // would then pay for at start-up.
  target->option = cmd->add_option(
      "--target", target->given,
      fmt::format("{} (default: $KILN_TARGET, else {}; kiln devices lists the targets)", what,
                  builtin_default_target()));
}

std::string builtin_default_target() {
#ifdef KILN_HAVE_DNNL
  return "cpu";
#else
  return "ref";
#endif
}

Result<ResolvedTarget> resolve_target(const TargetOption& target) {
  ResolvedTarget r;
  if (target.was_given()) {
    r = {target.given, "--target"};
  } else if (env_flag_is_set(EnvFlag::kTarget) && !env_flag_string(EnvFlag::kTarget).empty()) {
    r = {env_flag_string(EnvFlag::kTarget), "KILN_TARGET"};
  } else {
    return ResolvedTarget{builtin_default_target(), "default"};
  }
  const std::vector<std::string> names = compiler::target_names();
  if (r.name == "cuda" || std::find(names.begin(), names.end(), r.name) != names.end()) return r;
  const std::string valid = fmt::format("{}", fmt::join(names, ", "));
  if (r.source == "--target") {
    return not_found_error(fmt::format("--target {}: unknown target \"{}\"; this build has: {}",
                                       r.name, r.name, valid));
  }
  return not_found_error(fmt::format(
      "KILN_TARGET={}: unknown target \"{}\"; this build has: {} (set KILN_TARGET to one of them, "
      "unset it, or pass --target)",
      r.name, r.name, valid));
}

}  // namespace kiln::tools
