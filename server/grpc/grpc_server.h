// SPDX-License-Identifier: Apache-2.0
// GrpcServer: the KServe v2 gRPC transport (inference.GRPCInferenceService and kiln's
// KilnWorkerService) on gRPC's callback API, handing every call to server/core.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/core/server.h"
#include "server/core/tls.h"
#include "server/grpc/grpc_convert.h"

namespace kiln::server::grpc {

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  // 0 picks a free port; port() says which.
  uint16_t port = 8001;
  // A larger request message is refused by gRPC with RESOURCE_EXHAUSTED.
  int64_t max_message_bytes = int64_t{256} << 20;
  GrpcLimits limits;
  // TLS (grpc::SslServerCredentials) when a certificate is given; mutual TLS with a client CA.
  TlsFiles tls;
};

class GrpcServer {
 public:
  // Binds, listens and starts serving; fails naming the address when the port is taken.
  static Result<std::unique_ptr<GrpcServer>> start(Server* server, GrpcServerOptions options);
  // stop().
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  uint16_t port() const;

  // Stops accepting calls, waits up to `grace` for the calls in flight to be answered, then
  // cancels the rest. Call Server::shutdown() first so queued requests are answered. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(30));

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::server::grpc
