// SPDX-License-Identifier: Apache-2.0
// NativeClient: the client interface straight onto an in-process Server (no sockets, no copies).
#pragma once

#include "client/client.h"
#include "server/core/server.h"

namespace kiln::client {

class NativeClient final : public Client {
 public:
  // `server` must outlive the client.
  explicit NativeClient(server::Server* server) : server_(server) {}

  Result<bool> server_live() override { return server_->live(); }
  Result<bool> server_ready() override { return server_->ready(); }
  Result<ServerMetadata> server_metadata() override { return server_->metadata(); }
  Result<bool> model_ready(const std::string& model, const std::string& version = "") override {
    return server_->model_ready(model, version);
  }
  Result<ModelMetadata> model_metadata(const std::string& model,
                                       const std::string& version = "") override {
    return server_->model_metadata(model, version);
  }
  Status model_load(const std::string& model, const Parameters& parameters = {}) override {
    return server_->load_model(model, parameters);
  }
  Status model_unload(const std::string& model) override { return server_->unload_model(model); }
  Result<std::string> worker_load(const std::string& worker,
                                  const Parameters& parameters = {}) override {
    return server_->load_worker(worker, parameters);
  }
  Status worker_unload(const std::string& endpoint) override {
    return server_->unload_worker(endpoint);
  }
  Result<InferenceResponse> model_infer(const std::string& model,
                                        InferenceRequest request) override {
    return model_infer_async(model, std::move(request)).get();
  }
  std::future<Result<InferenceResponse>> model_infer_async(const std::string& model,
                                                           InferenceRequest request) override {
    if (!model.empty()) request.model = model;
    return server_->infer(std::move(request));
  }

 private:
  server::Server* server_;
};

}  // namespace kiln::client
