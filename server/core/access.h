// SPDX-License-Identifier: Apache-2.0
// AccessPolicy: which endpoint groups need a header (HTTP) or metadata entry (gRPC) with a given
// value, as Triton's --http-restricted-api: "inference:x-api-key=SECRET" makes every inference
// call carry `x-api-key: SECRET`. Checked by both transports; the in-process API is not.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::server {

enum class ApiGroup : int {
  kHealth,           // /v2/health/*, model ready; ServerLive, ServerReady, ModelReady
  kMetadata,         // /v2, model metadata and config; ServerMetadata, ModelMetadata, ModelConfig
  kInference,        // infer; ModelInfer
  kModelRepository,  // repository index, load, unload, workers; Repository*, Worker*
  kStatistics,       // stats and /metrics; ModelStatistics
  kTrace,            // /v2[/models/NAME]/trace/setting
};

// "health", "metadata", "inference", "model-repository", "statistics", "trace".
std::string_view api_group_name(ApiGroup group);

class AccessPolicy {
 public:
  // Each spec is "GROUP[,GROUP...]:KEY=VALUE" (Triton's --http-restricted-api syntax); KEY is a
  // header name, compared without case; VALUE "env:NAME" is the environment variable NAME.
  // Invalid argument naming the spec on a bad one.
  static Result<AccessPolicy> parse(const std::vector<std::string>& specs);

  bool empty() const { return rules_.empty(); }
  // The header names (lower case) the rules read.
  std::vector<std::string> keys() const;

  // OK when every rule on `group` is met; unauthenticated naming the group and the header
  // otherwise (never the expected value). `header(lowercase key)` is what the request carries.
  Status check(ApiGroup group,
               const std::function<std::optional<std::string>(std::string_view)>& header) const;

 private:
  struct Rule {
    std::vector<ApiGroup> groups;
    std::string key;  // lower case
    std::string value;
  };
  std::vector<Rule> rules_;
};

}  // namespace kiln::server
