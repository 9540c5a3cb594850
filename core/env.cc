// SPDX-License-Identifier: Apache-2.0
// Environment flag lookup.
#include "core/env.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>

#include "core/check.h"

namespace kiln {

namespace {
constexpr EnvFlagInfo kFlags[] = {
#define KILN_ENV_FLAG(id, var, def, component, doc) {EnvFlag::id, var, def, component, doc},
#include "core/env_flags.inc"
#undef KILN_ENV_FLAG
};

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::span<const EnvFlagInfo> env_flags() { return kFlags; }

const EnvFlagInfo& env_flag_info(EnvFlag flag) {
  auto index = static_cast<size_t>(flag);
  KILN_CHECK(index < std::size(kFlags), "invalid EnvFlag");
  return kFlags[index];
}

const char* env_flag_c_str(EnvFlag flag) {
  const EnvFlagInfo& info = env_flag_info(flag);
  // Every variable and default in the table is a string literal: data() is NUL-terminated.
  const char* value = std::getenv(info.variable.data());
  return value != nullptr ? value : info.default_value.data();
}

bool env_flag_is_set(EnvFlag flag) {
  return std::getenv(env_flag_info(flag).variable.data()) != nullptr;
}

std::string env_flag_string(EnvFlag flag) {
  return env_flag_c_str(flag);
}

int64_t env_flag_int(EnvFlag flag) {
  if (auto v = parse_int(env_flag_string(flag))) return *v;
  return parse_int(env_flag_info(flag).default_value).value_or(0);
}

bool env_flag_bool(EnvFlag flag) {
  std::string v = env_flag_string(flag);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace kiln
