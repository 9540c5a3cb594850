// SPDX-License-Identifier: Apache-2.0
// `kiln env`'s three renderings of the flag table (core/env_flags.inc): text, JSON and Markdown.
#pragma once

#include <string>

namespace kiln::tools {

// One line per flag, grouped by component: variable, value in effect, default, description; a
// '*' before the value marks a variable set in the environment.
std::string env_flags_text();

// {"flags": [{"variable", "component", "value", "default", "set", "description"}, ...]} with the
// values in effect, in table order.
std::string env_flags_json();

// docs/debugging.md's flag tables: one per component, defaults only (the environment does not
// change it), so the committed page can be checked against the table (tools/check_env_flags.py).
std::string env_flags_markdown();

}  // namespace kiln::tools
