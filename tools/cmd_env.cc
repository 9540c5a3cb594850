// SPDX-License-Identifier: Apache-2.0
// `kiln env`: the environment variables kiln reads, with their current values and meaning.
#include <fmt/format.h>

#include "tools/command.h"
#include "tools/env_report.h"

namespace kiln::tools {

CommandAction add_env_command(CLI::App& app) {
  struct Options {
    bool json = false;
    bool markdown = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "env", "List the environment variables kiln reads, their current values and defaults");
  CLI::Option* json =
      cmd->add_flag("--json", opts->json, "as JSON: variable, component, value, default, set");
  cmd->add_flag("--markdown", opts->markdown,
                "docs/debugging.md's flag tables (defaults only, whatever the environment)")
      ->excludes(json);
  return [opts] {
    fmt::print("{}", opts->json       ? env_flags_json()
                     : opts->markdown ? env_flags_markdown()
                                      : env_flags_text());
    return 0;
  };
}

}  // namespace kiln::tools
