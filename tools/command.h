// SPDX-License-Identifier: Apache-2.0
// How a `kiln` subcommand plugs into the CLI: each file adds its own subcommand from one function.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace kiln::tools {

// A subcommand registers its options on `app` and returns the action to run when it was chosen.
// The action returns the process exit code.
using CommandAction = std::function<int()>;

CommandAction add_env_command(CLI::App& app);

}  // namespace kiln::tools
