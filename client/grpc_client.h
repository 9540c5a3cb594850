// SPDX-License-Identifier: Apache-2.0
// GrpcClient: the KServe v2 gRPC client (inference.GRPCInferenceService plus kiln's worker
// service) over one HTTP/2 channel, safe to use from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"

namespace grpc {
class Channel;
}

namespace kiln::client {

struct GrpcClientOptions {
  // Send inputs as raw_input_contents and ask for raw_output_contents (Triton's default); false
  // sends and asks for the typed contents fields.
  bool raw_inputs = true;
  bool raw_outputs = true;
  // The deadline of every call; an inference request that waits in the server's queue past it
  // fails with deadline exceeded.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // The largest message the client sends or accepts (-1: no limit).
  int max_message_bytes = -1;
  // Metadata sent with every call, e.g. {"x-api-key", "..."} (keys in lower case).
  std::vector<std::pair<std::string, std::string>> metadata;
  // TLS: the CA (PEM file) the server's certificate must chain to; empty with tls false is plain
  // text. For mutual TLS also the client's certificate and key (PEM files).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // A connection of this client's own: gRPC otherwise shares one TCP connection among every
  // channel to the same address in the process. Load generators open several so that one
  // connection's HTTP/2 stream is not what they measure.
  bool own_connection = false;
};

class GrpcClient final : public Client {
 public:
  // `url` is "host:port" (a "grpc://" prefix is accepted); nothing is connected until the first
  // call.
  static Result<std::unique_ptr<GrpcClient>> create(const std::string& url,
                                                    GrpcClientOptions options = {});
  ~GrpcClient() override;

  Result<bool> server_live() override;
  Result<bool> server_ready() override;
  Result<ServerMetadata> server_metadata() override;
  Result<bool> model_ready(const std::string& model, const std::string& version = "") override;
  Result<ModelMetadata> model_metadata(const std::string& model,
                                       const std::string& version = "") override;
  Status model_load(const std::string& model, const Parameters& parameters = {}) override;
  Status model_unload(const std::string& model) override;
  Result<std::string> worker_load(const std::string& worker,
                                  const Parameters& parameters = {}) override;
  Status worker_unload(const std::string& endpoint) override;
  Result<InferenceResponse> model_infer(const std::string& model,
                                        InferenceRequest request) override;
  std::future<Result<InferenceResponse>> model_infer_async(const std::string& model,
                                                           InferenceRequest request) override;

  struct Stubs;

 private:
  GrpcClient(std::string target, GrpcClientOptions options);
  // Makes the channel (reads the TLS files).
  Status connect();

  const std::string target_;
  const GrpcClientOptions options_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace kiln::client
