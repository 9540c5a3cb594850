// SPDX-License-Identifier: Apache-2.0
// Tests for the environment flag table and its typed accessors.
#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

namespace kiln {
namespace {

// Sets (or unsets, for nullopt) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(std::move(value));
  }
  ~ScopedEnv() { set(old_); }
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Env, TableIsWellFormed) {
  std::span<const EnvFlagInfo> flags = env_flags();
  ASSERT_FALSE(flags.empty());
  std::set<std::string_view> variables;
  const std::set<std::string_view> components = {"core",   "compiler", "cpu",       "cuda",
                                                 "server", "cli",      "packaging", "tests"};
  for (size_t i = 0; i < flags.size(); ++i) {
    const EnvFlagInfo& f = flags[i];
    EXPECT_EQ(static_cast<size_t>(f.flag), i) << f.variable;  // declaration order = enum order
    EXPECT_EQ(&env_flag_info(f.flag), &f);
    EXPECT_EQ(f.variable.rfind("KILN_", 0), 0u) << f.variable;
    EXPECT_FALSE(f.doc.empty()) << f.variable;
    EXPECT_TRUE(components.count(f.component)) << f.variable << ": component " << f.component;
    EXPECT_TRUE(variables.insert(f.variable).second) << "duplicate " << f.variable;
  }
  EXPECT_EQ(env_flag_info(EnvFlag::kLogLevel).variable, "KILN_LOG_LEVEL");
  EXPECT_EQ(env_flag_info(EnvFlag::kNumThreads).variable, "KILN_NUM_THREADS");
  EXPECT_EQ(env_flag_info(EnvFlag::kTracePasses).variable, "KILN_TRACE_PASSES");
  EXPECT_EQ(env_flag_info(EnvFlag::kTraceBatcher).variable, "KILN_TRACE_BATCHER");
  EXPECT_EQ(env_flag_info(EnvFlag::kCacheDir).variable, "KILN_CACHE_DIR");
}

TEST(Env, DefaultsWhenUnset) {
  ScopedEnv a("KILN_LOG_LEVEL", std::nullopt);
  ScopedEnv b("KILN_NUM_THREADS", std::nullopt);
  ScopedEnv c("KILN_TRACE_PASSES", std::nullopt);
  ScopedEnv d("KILN_CACHE_DIR", std::nullopt);
  EXPECT_EQ(env_flag_string(EnvFlag::kLogLevel), "warning");
  EXPECT_EQ(env_flag_string(EnvFlag::kNumThreads), "0");
  EXPECT_EQ(env_flag_int(EnvFlag::kNumThreads), 0);
  EXPECT_FALSE(env_flag_bool(EnvFlag::kTracePasses));
  EXPECT_EQ(env_flag_int(EnvFlag::kTracePasses), 0);
  EXPECT_EQ(env_flag_string(EnvFlag::kCacheDir), "");
  for (const EnvFlagInfo& f : env_flags()) {
    ScopedEnv unset(std::string(f.variable).c_str(), std::nullopt);
    EXPECT_EQ(env_flag_string(f.flag), f.default_value) << f.variable;
  }
}

TEST(Env, StringIsReadOnEveryCall) {
  ScopedEnv env("KILN_CACHE_DIR", "/var/cache/kiln");
  EXPECT_EQ(env_flag_string(EnvFlag::kCacheDir), "/var/cache/kiln");
  env.set("/tmp/other dir");
  EXPECT_EQ(env_flag_string(EnvFlag::kCacheDir), "/tmp/other dir");
  env.set("");  // set but empty is a value, not the default
  EXPECT_EQ(env_flag_string(EnvFlag::kCacheDir), "");
  env.set(std::nullopt);
  EXPECT_EQ(env_flag_string(EnvFlag::kCacheDir), "");
  ScopedEnv level("KILN_LOG_LEVEL", "debug");
  EXPECT_EQ(env_flag_string(EnvFlag::kLogLevel), "debug");
  level.set(std::nullopt);
  EXPECT_EQ(env_flag_string(EnvFlag::kLogLevel), "warning");
}

TEST(Env, Int) {
  ScopedEnv env("KILN_NUM_THREADS", "12");
  EXPECT_EQ(env_flag_int(EnvFlag::kNumThreads), 12);
  env.set("-4");
  EXPECT_EQ(env_flag_int(EnvFlag::kNumThreads), -4);
  env.set("9223372036854775807");
  EXPECT_EQ(env_flag_int(EnvFlag::kNumThreads), INT64_MAX);
  // Anything that is not entirely an int64 gives the default.
  for (const char* bad :
       {"abc", "", " 5", "5 ", "7x", "1.5", "0x10", "+3", "99999999999999999999"}) {
    env.set(bad);
    EXPECT_EQ(env_flag_int(EnvFlag::kNumThreads), 0) << "'" << bad << "'";
  }
}

TEST(Env, Bool) {
  ScopedEnv env("KILN_TRACE_PASSES", std::nullopt);
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "Yes", "on", "ON"}) {
    env.set(yes);
    EXPECT_TRUE(env_flag_bool(EnvFlag::kTracePasses)) << yes;
  }
  for (const char* no : {"0", "false", "no", "off", "", "2", "y", "enable", " 1"}) {
    env.set(no);
    EXPECT_FALSE(env_flag_bool(EnvFlag::kTracePasses)) << "'" << no << "'";
  }
  env.set("1");
  EXPECT_EQ(env_flag_int(EnvFlag::kTracePasses), 1);
}

TEST(Env, CStrGivesTheValueOrTheDefault) {
  ScopedEnv env("KILN_CUDA_ATTENTION_BLOCKS", std::nullopt);
  EXPECT_STREQ(env_flag_c_str(EnvFlag::kCudaAttentionBlocks), "3");
  EXPECT_FALSE(env_flag_is_set(EnvFlag::kCudaAttentionBlocks));
  env.set("4");
  EXPECT_STREQ(env_flag_c_str(EnvFlag::kCudaAttentionBlocks), "4");
  EXPECT_TRUE(env_flag_is_set(EnvFlag::kCudaAttentionBlocks));
  env.set("");
  EXPECT_STREQ(env_flag_c_str(EnvFlag::kCudaAttentionBlocks), "");
  EXPECT_TRUE(env_flag_is_set(EnvFlag::kCudaAttentionBlocks));
  // Flags whose default is empty give "" (never null) when unset.
  ScopedEnv mma("KILN_CUDA_CONV_MMA", std::nullopt);
  ASSERT_NE(env_flag_c_str(EnvFlag::kCudaConvMma), nullptr);
  EXPECT_STREQ(env_flag_c_str(EnvFlag::kCudaConvMma), "");
  for (const EnvFlagInfo& f : env_flags()) {
    ScopedEnv unset(std::string(f.variable).c_str(), std::nullopt);
    EXPECT_EQ(std::string(env_flag_c_str(f.flag)), f.default_value) << f.variable;
  }
}

TEST(EnvDeathTest, InvalidFlagAborts) {
  EXPECT_DEATH((void)env_flag_info(static_cast<EnvFlag>(1000)), "invalid EnvFlag");
}

}  // namespace
}  // namespace kiln
