// SPDX-License-Identifier: Apache-2.0
// Renders the flag table for `kiln env`.
#include "tools/env_report.h"

#include <fmt/format.h>

#include <string_view>

#include "core/env.h"
#include "tools/model_io.h"

namespace kiln::tools {

namespace {

// What each component's flags are about, as the Markdown headings say it.
std::string_view component_title(std::string_view component) {
  if (component == "core") return "Every part";
  if (component == "compiler") return "The compiler";
  if (component == "cpu") return "The cpu target";
  if (component == "cuda") return "The cuda target";
  if (component == "server") return "The server";
  if (component == "cli") return "The kiln command-line tool";
  if (component == "tests") return "kiln's own tests (not read by kiln itself)";
  if (component == "packaging")
    return "Building the wheel (python/setup.py; not read by kiln itself)";
  return component;
}

// `s` with the characters that would break a Markdown table cell escaped.
std::string markdown_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string env_flags_text() {
  size_t width = 0;
  for (const EnvFlagInfo& f : env_flags()) width = std::max(width, f.variable.size());
  std::string out;
  std::string_view component;
  for (const EnvFlagInfo& f : env_flags()) {
    if (f.component != component) {
      component = f.component;
      out += fmt::format("{}{}:\n", out.empty() ? "" : "\n", component);
    }
    const std::string value = env_flag_string(f.flag);
    out += fmt::format("  {:<{}} {}{:<10} (default {}) {}\n", f.variable, width,
                       env_flag_is_set(f.flag) ? '*' : ' ', value.empty() ? "\"\"" : value,
                       f.default_value.empty() ? "\"\"" : f.default_value, f.doc);
  }
  return out;
}

std::string env_flags_json() {
  std::string out = "{\"flags\": [";
  bool first = true;
  for (const EnvFlagInfo& f : env_flags()) {
    out += fmt::format(
        "{}\n  {{\"variable\": \"{}\", \"component\": \"{}\", \"value\": \"{}\", \"default\": "
        "\"{}\", \"set\": {}, \"description\": \"{}\"}}",
        first ? "" : ",", f.variable, f.component, json_escape(env_flag_string(f.flag)),
        json_escape(f.default_value), env_flag_is_set(f.flag), json_escape(f.doc));
    first = false;
  }
  out += "\n]}\n";
  return out;
}

std::string env_flags_markdown() {
  std::string out;
  std::string_view component;
  for (const EnvFlagInfo& f : env_flags()) {
    if (f.component != component) {
      component = f.component;
      out += fmt::format("{}### {} ({})\n\n| variable | default | meaning |\n|---|---|---|\n",
                         out.empty() ? "" : "\n", component_title(component), component);
    }
    out += fmt::format("| `{}` | {} | {} |\n", f.variable,
                       f.default_value.empty() ? "(empty)" : fmt::format("`{}`", f.default_value),
                       markdown_cell(f.doc));
  }
  return out;
}

}  // namespace kiln::tools
