// SPDX-License-Identifier: Apache-2.0
// How a `kiln` subcommand plugs into the CLI: each file adds its own subcommand from one function.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "core/status.h"

namespace kiln::tools {

// A subcommand registers its options on `app` and returns the action to run when it was chosen.
// The action returns the process exit code.
using CommandAction = std::function<int()>;

CommandAction add_compile_command(CLI::App& app);
CommandAction add_devices_command(CLI::App& app);
CommandAction add_env_command(CLI::App& app);
CommandAction add_loadgen_command(CLI::App& app);
CommandAction add_ops_command(CLI::App& app);
CommandAction add_perf_command(CLI::App& app);
CommandAction add_pipeline_command(CLI::App& app);
CommandAction add_print_command(CLI::App& app);
CommandAction add_run_command(CLI::App& app);
CommandAction add_serve_command(CLI::App& app);
CommandAction add_verify_command(CLI::App& app);

// Prints `kiln: <message>` to stderr and returns the exit code for a failed command.
int report_error(const Status& status);

}  // namespace kiln::tools
