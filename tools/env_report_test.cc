// SPDX-License-Identifier: Apache-2.0
// Tests for `kiln env`'s renderings of the flag table.
#include "tools/env_report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/env.h"

namespace kiln::tools {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(EnvReport, TextListsEveryFlagWithItsValue) {
  ::setenv("KILN_CUDA_DW_PIXELS", "8", 1);
  ::unsetenv("KILN_CPU_STEM");
  const std::string text = env_flags_text();
  ::unsetenv("KILN_CUDA_DW_PIXELS");
  for (const EnvFlagInfo& f : env_flags()) {
    EXPECT_EQ(count(text, std::string(f.variable) + " "), 1u) << f.variable;
  }
  EXPECT_NE(text.find("KILN_CUDA_DW_PIXELS        *8          (default 2) output pixels"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("KILN_CPU_STEM               auto       (default auto) cpu target first"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncuda:\n"), std::string::npos);
}

TEST(EnvReport, JsonHasOneObjectPerFlag) {
  ::setenv("KILN_CACHE_DIR", "/tmp/a \"quoted\" dir", 1);
  const std::string json = env_flags_json();
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(count(json, "{\"variable\": "), env_flags().size());
  EXPECT_NE(json.find("{\"variable\": \"KILN_CACHE_DIR\", \"component\": \"core\", \"value\": "
                      "\"/tmp/a \\\"quoted\\\" dir\", \"default\": \"\", \"set\": true"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"variable\": \"KILN_LOG_LEVEL\", \"component\": \"core\""),
            std::string::npos);
}

TEST(EnvReport, MarkdownIgnoresTheEnvironment) {
  const std::string before = env_flags_markdown();
  ::setenv("KILN_LOG_LEVEL", "trace", 1);
  EXPECT_EQ(env_flags_markdown(), before);
  ::unsetenv("KILN_LOG_LEVEL");
  EXPECT_EQ(count(before, "\n| `KILN_"), env_flags().size());
  EXPECT_NE(before.find("### The cuda target (cuda)\n\n| variable | default | meaning |\n"),
            std::string::npos)
      << before;
  EXPECT_NE(before.find("| `KILN_CACHE_DIR` | (empty) | where compiled models"), std::string::npos);
  EXPECT_NE(before.find("| `KILN_LOG_LEVEL` | `warning` | log verbosity"), std::string::npos);
}

}  // namespace
}  // namespace kiln::tools
