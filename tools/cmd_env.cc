// SPDX-License-Identifier: Apache-2.0
// `kiln env`: the environment variables kiln reads, with their current values and meaning.
#include <fmt/format.h>

#include "core/env.h"
#include "tools/command.h"

namespace kiln::tools {

CommandAction add_env_command(CLI::App& app) {
  app.add_subcommand("env", "List the environment variables kiln reads and their current values");
  return [] {
    for (const EnvFlagInfo& f : env_flags()) {
      fmt::print("{:<20} = {:<10} {}\n", f.variable, env_flag_string(f.flag), f.doc);
    }
    return 0;
  };
}

}  // namespace kiln::tools
