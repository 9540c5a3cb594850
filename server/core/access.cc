// SPDX-License-Identifier: Apache-2.0
// Parsing and checking --restricted-api rules.
#include "server/core/access.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

namespace kiln::server {

namespace {

constexpr std::array<std::pair<ApiGroup, std::string_view>, 6> kGroups = {{
    {ApiGroup::kHealth, "health"},
    {ApiGroup::kMetadata, "metadata"},
    {ApiGroup::kInference, "inference"},
    {ApiGroup::kModelRepository, "model-repository"},
    {ApiGroup::kStatistics, "statistics"},
    {ApiGroup::kTrace, "trace"},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Compares in time that depends on the lengths only, not on where the bytes first differ.
bool same(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string_view api_group_name(ApiGroup group) {
  for (const auto& [g, name] : kGroups) {
    if (g == group) return name;
  }
  return "?";
}

Result<AccessPolicy> AccessPolicy::parse(const std::vector<std::string>& specs) {
  AccessPolicy policy;
  for (const std::string& spec : specs) {
    const size_t colon = spec.find(':');
    const size_t equals = spec.find('=', colon == std::string::npos ? 0 : colon);
    auto bad = [&](std::string_view why) {
      return invalid_argument_error(fmt::format(
          "restricted API \"{}\": {}; write GROUP[,GROUP...]:HEADER=VALUE with groups from "
          "health, metadata, inference, model-repository, statistics, trace",
          spec, why));
    };
    if (colon == std::string::npos || equals == std::string::npos) return bad("no ':' or '='");
    Rule rule;
    rule.key = lower(std::string_view(spec).substr(colon + 1, equals - colon - 1));
    rule.value = spec.substr(equals + 1);
    // "env:NAME" keeps the key off the command line (and out of /proc/PID/cmdline).
    if (rule.value.rfind("env:", 0) == 0) {
      const char* from_env = std::getenv(rule.value.c_str() + 4);
      if (from_env == nullptr || *from_env == '\0') {
        return bad(fmt::format("environment variable {} is not set", rule.value.substr(4)));
      }
      rule.value = from_env;
    }
    if (rule.key.empty() || rule.value.empty()) return bad("the header or its value is empty");
    std::string_view groups = std::string_view(spec).substr(0, colon);
    while (!groups.empty()) {
      const size_t comma = groups.find(',');
      const std::string_view name = groups.substr(0, comma);
      auto it = std::find_if(kGroups.begin(), kGroups.end(),
                             [&](const auto& g) { return g.second == name; });
      if (it == kGroups.end()) return bad(fmt::format("no group \"{}\"", name));
      rule.groups.push_back(it->first);
      groups = comma == std::string_view::npos ? std::string_view() : groups.substr(comma + 1);
    }
    if (rule.groups.empty()) return bad("no group");
    policy.rules_.push_back(std::move(rule));
  }
  return policy;
}

std::vector<std::string> AccessPolicy::keys() const {
  std::vector<std::string> out;
  for (const Rule& r : rules_) {
    if (std::find(out.begin(), out.end(), r.key) == out.end()) out.push_back(r.key);
  }
  return out;
}

Status AccessPolicy::check(
    ApiGroup group,
    const std::function<std::optional<std::string>(std::string_view)>& header) const {
  for (const Rule& r : rules_) {
    if (std::find(r.groups.begin(), r.groups.end(), group) == r.groups.end()) continue;
    const std::optional<std::string> sent = header(r.key);
    if (!sent || !same(*sent, r.value)) {
      return Status(
          StatusCode::kUnauthenticated,
          fmt::format(
              "{} endpoints need the header \"{}\" with the server's key ({}); send it as an HTTP "
              "header or gRPC metadata",
              api_group_name(group), r.key, sent ? "the value sent is wrong" : "none was sent"));
    }
  }
  return Status();
}

}  // namespace kiln::server
