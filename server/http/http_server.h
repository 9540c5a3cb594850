// SPDX-License-Identifier: Apache-2.0
// HttpServer: the KServe v2 REST transport on Boost.Beast — keep-alive connections served by a
// pool of threads, handing every request to the Router.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/core/server.h"
#include "server/http/infer_json.h"

namespace kiln::server::http {

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  // 0 picks a free port; port() says which.
  uint16_t port = 8000;
  // Threads running the connections (0: KILN_NUM_THREADS or one per core).
  int threads = 0;
  // A larger body is answered 413 and the connection is closed.
  uint64_t max_body_bytes = uint64_t{256} << 20;
  // A connection idle this long (or this slow to send a request) is closed.
  std::chrono::seconds idle_timeout{300};
  DecodeLimits limits;
};

class HttpServer {
 public:
  // Binds, listens and starts the threads; fails naming the address when the port is taken.
  static Result<std::unique_ptr<HttpServer>> start(Server* server, HttpServerOptions options);
  // stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;

  // Stops accepting connections, waits up to `grace` for the responses still being computed or
  // written, then closes every connection and joins the threads. Call Server::shutdown() first so
  // queued requests are answered. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(30));

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::server::http
