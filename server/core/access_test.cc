// SPDX-License-Identifier: Apache-2.0
// --restricted-api rules: parsing, and which requests they let through.
#include "server/core/access.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>

namespace kiln::server {
namespace {

// A header lookup over `headers` (lower-case names).
auto lookup(const std::map<std::string, std::string>& headers) {
  return [&headers](std::string_view key) -> std::optional<std::string> {
    auto it = headers.find(std::string(key));
    if (it == headers.end()) return std::nullopt;
    return it->second;
  };
}

TEST(AccessPolicy, RulesApplyToTheirGroupsOnly) {
  Result<AccessPolicy> p = AccessPolicy::parse(
      {"model-repository,statistics:X-Admin-Key=admin", "inference:x-api-key=infer"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->keys(), (std::vector<std::string>{"x-admin-key", "x-api-key"}));
  const std::map<std::string, std::string> none, admin{{"x-admin-key", "admin"}},
      wrong{{"x-admin-key", "admiN"}}, infer{{"x-api-key", "infer"}};
  EXPECT_TRUE(p->check(ApiGroup::kHealth, lookup(none)).ok());
  EXPECT_TRUE(p->check(ApiGroup::kMetadata, lookup(none)).ok());
  EXPECT_TRUE(p->check(ApiGroup::kModelRepository, lookup(admin)).ok());
  EXPECT_TRUE(p->check(ApiGroup::kStatistics, lookup(admin)).ok());
  EXPECT_TRUE(p->check(ApiGroup::kInference, lookup(infer)).ok());
  Status missing = p->check(ApiGroup::kModelRepository, lookup(infer));
  EXPECT_EQ(missing.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(
      missing.message(),
      "model-repository endpoints need the header \"x-admin-key\" with the server's key (none "
      "was sent); send it as an HTTP header or gRPC metadata");
  Status bad = p->check(ApiGroup::kStatistics, lookup(wrong));
  EXPECT_EQ(bad.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(bad.message().find("the value sent is wrong"), std::string::npos);
  EXPECT_EQ(bad.message().find("admin\""), std::string::npos);  // never the expected value
  EXPECT_EQ(p->check(ApiGroup::kInference, lookup(admin)).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(AccessPolicy::parse({}).value().empty());
}

TEST(AccessPolicy, BadSpecsAreRefusedNamingThem) {
  for (const char* spec : {"inference", "inference:key", ":k=v", "inference:=v",
                           "inference:k=", "infer:k=v", "inference,,metadata:k=v"}) {
    Result<AccessPolicy> p = AccessPolicy::parse({spec});
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(std::string("\"") + spec + "\""), std::string::npos)
        << p.status().message();
  }
}

TEST(AccessPolicy, AValueCanComeFromTheEnvironment) {
  ::setenv("KILN_TEST_API_KEY", "s3cret", 1);
  Result<AccessPolicy> p = AccessPolicy::parse({"inference:x-api-key=env:KILN_TEST_API_KEY"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const std::map<std::string, std::string> ok{{"x-api-key", "s3cret"}};
  EXPECT_TRUE(p->check(ApiGroup::kInference, lookup(ok)).ok());
  ::unsetenv("KILN_TEST_API_KEY");
  EXPECT_NE(AccessPolicy::parse({"inference:x-api-key=env:KILN_TEST_API_KEY"})
                .status()
                .message()
                .find("KILN_TEST_API_KEY is not set"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::server
