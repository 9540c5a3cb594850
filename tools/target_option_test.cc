// SPDX-License-Identifier: Apache-2.0
// Tests for how a command's target is chosen: --target, then KILN_TARGET, then the default.
#include "tools/target_option.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "compiler/targets/target.h"

namespace kiln::tools {
namespace {

// KILN_TARGET as given for one test, unset afterwards.
class TargetOptionTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("KILN_TARGET"); }

  // `args` parsed by an app with the --target option; the resolved target.
  Result<ResolvedTarget> parse(std::vector<std::string> args) {
    CLI::App app;
    TargetOption target;
    add_target_option(&app, &target, "where to run");
    std::vector<const char*> argv = {"kiln"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return resolve_target(target);
  }
};

TEST_F(TargetOptionTest, DefaultIsCpuWhereBuiltElseRef) {
  ::unsetenv("KILN_TARGET");
  auto r = parse({});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
#ifdef KILN_HAVE_DNNL
  EXPECT_EQ(r->name, "cpu");
#else
  EXPECT_EQ(r->name, "ref");
#endif
  EXPECT_EQ(r->source, "default");
  EXPECT_EQ(builtin_default_target(), r->name);
}

TEST_F(TargetOptionTest, EnvironmentOverridesTheDefault) {
  ::setenv("KILN_TARGET", "ref", 1);
  auto r = parse({});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "ref");
  EXPECT_EQ(r->source, "KILN_TARGET");
}

TEST_F(TargetOptionTest, EmptyEnvironmentValueMeansTheDefault) {
  ::setenv("KILN_TARGET", "", 1);
  auto r = parse({});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, builtin_default_target());
  EXPECT_EQ(r->source, "default");
}

TEST_F(TargetOptionTest, FlagOverridesTheEnvironment) {
  ::setenv("KILN_TARGET", "nonsense", 1);
  auto r = parse({"--target", "ref"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "ref");
  EXPECT_EQ(r->source, "--target");
}

TEST_F(TargetOptionTest, UnknownFlagValueNamesTheFlagAndTheValidTargets) {
  auto r = parse({"--target", "tpu"});
  ASSERT_FALSE(r.ok());
  const std::string message(r.status().message());
  EXPECT_NE(message.find("--target tpu: unknown target \"tpu\"; this build has: ref"),
            std::string::npos)
      << message;
}

TEST_F(TargetOptionTest, UnknownEnvironmentValueNamesTheVariable) {
  ::setenv("KILN_TARGET", "gpu", 1);
  auto r = parse({});
  ASSERT_FALSE(r.ok());
  const std::string message(r.status().message());
  EXPECT_EQ(message.rfind("KILN_TARGET=gpu: unknown target \"gpu\"; this build has: ref", 0), 0u)
      << message;
  EXPECT_NE(message.find("unset it, or pass --target"), std::string::npos) << message;
}

TEST_F(TargetOptionTest, CudaIsLeftToMakeTargetWhichSaysWhyItCannotRun) {
  auto r = parse({"--target", "cuda"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "cuda");
}

TEST_F(TargetOptionTest, HelpNamesTheDefaultAndWhereTheTargetsAreListed) {
  CLI::App app;
  TargetOption target;
  add_target_option(&app, &target, "where to run");
  const std::string help = app.help();
  EXPECT_NE(help.find("default: $KILN_TARGET, else " + builtin_default_target()), std::string::npos)
      << help;
  EXPECT_NE(help.find("kiln devices lists the targets"), std::string::npos) << help;
}

}  // namespace
}  // namespace kiln::tools
