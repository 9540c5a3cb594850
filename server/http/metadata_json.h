// SPDX-License-Identifier: Apache-2.0
// The JSON bodies of the non-inference KServe v2 endpoints (metadata, readiness, repository,
// configuration, statistics, load parameters), both ways.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/core/server.h"
#include "server/core/types.h"

namespace kiln::server::http {

// {"error": "..."}.
std::string error_json(std::string_view message);
std::string server_metadata_json(const ServerMetadata& metadata);
Result<ServerMetadata> parse_server_metadata_json(std::string_view body);
std::string model_metadata_json(const ModelMetadata& metadata);
Result<ModelMetadata> parse_model_metadata_json(std::string_view body);
// {"name": ..., "ready": ...} and {"models": [...]}.
std::string model_ready_json(std::string_view name, bool ready);
std::string model_list_json(const std::vector<std::string>& names);
std::string repository_index_json(const std::vector<RepositoryEntry>& entries);
// The model configuration extension's answer, in Triton's field names (dims with the batch dim
// left out when the model batches).
std::string model_config_json(const ModelConfig& config);
std::string statistics_json(const std::vector<ModelStatistics>& stats);
// Parses a JSON object of parameters (`{"batch": 4, "model": "x.onnx"}`); an empty body is empty.
// When the object has a "parameters" object, that one is read.
Result<Parameters> parse_parameters_json(std::string_view body);
std::string parameters_json(const Parameters& parameters);

}  // namespace kiln::server::http
