// SPDX-License-Identifier: Apache-2.0
// The table of environment flags kiln reads (core/env_flags.inc), with typed accessors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

enum class EnvFlag : int {
#define KILN_ENV_FLAG(id, var, def, component, doc) id,
#include "core/env_flags.inc"
#undef KILN_ENV_FLAG
};

struct EnvFlagInfo {
  EnvFlag flag;
  std::string_view variable;
  std::string_view default_value;
  // The part that reads it: "core", "compiler", "cpu", "cuda", "server", "tests" (kiln's own
  // tests) or "packaging" (the wheel's build). A target's flags (component == its name) may change
  // what it compiles.
  std::string_view component;
  std::string_view doc;
};

// Every flag, in declaration order.
std::span<const EnvFlagInfo> env_flags();
const EnvFlagInfo& env_flag_info(EnvFlag flag);

// The variable's value, or its default when unset. Read on every call (not cached).
std::string env_flag_string(EnvFlag flag);
// Parsed as an integer; the default when unset or not a number.
int64_t env_flag_int(EnvFlag flag);
// True for "1", "true", "yes", "on" (any case).
bool env_flag_bool(EnvFlag flag);
// The value as getenv() gives it, or the default when unset; never null. Valid until the
// environment changes (as getenv()'s pointer is).
const char* env_flag_c_str(EnvFlag flag);
// Whether the variable is set (to anything, even empty).
bool env_flag_is_set(EnvFlag flag);

}  // namespace kiln
