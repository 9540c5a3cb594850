// SPDX-License-Identifier: Apache-2.0
// Client: the one interface of kiln's C++ clients (HTTP, gRPC and in-process), with the KServe v2
// calls and amdinfer's worker calls.
#pragma once

#include <chrono>
#include <future>
#include <string>

#include "core/status.h"
#include "server/core/types.h"

namespace kiln::client {

using server::InferenceRequest;
using server::InferenceResponse;
using server::ModelMetadata;
using server::Parameters;
using server::ServerMetadata;

// Every call returns the server's error as a Status with the server's message: not found for an
// unknown model, invalid argument for a bad request, resource exhausted for a full queue,
// unavailable when the server (or the connection) is not there.
class Client {
 public:
  virtual ~Client() = default;

  virtual Result<bool> server_live() = 0;
  virtual Result<bool> server_ready() = 0;
  virtual Result<ServerMetadata> server_metadata() = 0;
  virtual Result<bool> model_ready(const std::string& model, const std::string& version = "") = 0;
  virtual Result<ModelMetadata> model_metadata(const std::string& model,
                                               const std::string& version = "") = 0;
  virtual Status model_load(const std::string& model, const Parameters& parameters = {}) = 0;
  virtual Status model_unload(const std::string& model) = 0;
  // amdinfer's workerLoad: returns the endpoint to send requests to.
  virtual Result<std::string> worker_load(const std::string& worker,
                                          const Parameters& parameters = {}) = 0;
  virtual Status worker_unload(const std::string& endpoint) = 0;
  // Runs `request` on `model` (request.model and request.version are filled from the arguments
  // when given).
  virtual Result<InferenceResponse> model_infer(const std::string& model,
                                                InferenceRequest request) = 0;
  virtual std::future<Result<InferenceResponse>> model_infer_async(const std::string& model,
                                                                   InferenceRequest request) = 0;

  // Polls server_ready() until it is true; unavailable (with the last error) after `timeout`.
  Status wait_until_server_ready(std::chrono::milliseconds timeout = std::chrono::seconds(30));
};

}  // namespace kiln::client
