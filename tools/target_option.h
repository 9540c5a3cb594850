// SPDX-License-Identifier: Apache-2.0
// The one --target option of the subcommands that compile or run a model, and how its value is
// chosen: --target, else $KILN_TARGET, else cpu (ref in a build without oneDNN).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "core/status.h"

namespace kiln::tools {

// What the command line said about the target; resolve_target() turns it into a name.
struct TargetOption {
  std::string given;              // --target's value, when `option` was given
  CLI::Option* option = nullptr;  // set by add_target_option
  bool was_given() const { return option != nullptr && option->count() > 0; }
};

// Adds `--target NAME` to `cmd` with `what` as its help (the default is said after it).
void add_target_option(CLI::App* cmd, TargetOption* target, const std::string& what);

// The target when none is given: cpu where this build has it, else ref.
std::string builtin_default_target();

// Where the target of a command comes from: "--target", "KILN_TARGET" or "default".
struct ResolvedTarget {
  std::string name;
  std::string source;
};

// --target when given, else $KILN_TARGET when set and not empty, else builtin_default_target().
// Fails with a message naming the flag or variable and the valid targets when the name is not a
// target this build knows. "cuda" is always accepted here: make_target() says why it cannot run.
Result<ResolvedTarget> resolve_target(const TargetOption& target);

}  // namespace kiln::tools
