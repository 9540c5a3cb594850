// SPDX-License-Identifier: Apache-2.0
// HttpServer: the KServe v2 REST transport on Boost.Beast — keep-alive connections served by a
// pool of threads, handing every request to the Router.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/core/nvml.h"
#include "server/core/server.h"
#include "server/core/tls.h"
#include "server/http/infer_json.h"

namespace kiln::server::http {

struct HttpServerOptions {
  // "0.0.0.0" or "::" listen on every interface, IPv4 and IPv6 (as gRPC does); anything else on
  // that one address.
  std::string address = "0.0.0.0";
  // 0 picks a free port; port() says which.
  uint16_t port = 8000;
  // Threads running the connections (0: KILN_NUM_THREADS or one per core).
  int threads = 0;
  // A larger body is answered 413 and the connection is closed. Memory for a body is committed as
  // its bytes arrive, never for the declared length up front.
  uint64_t max_body_bytes = uint64_t{256} << 20;
  // The request line and header fields, and (chunked bodies) the chunk lines and trailer fields:
  // larger ones are answered 431 and the connection is closed. At most 65535 each.
  uint32_t max_header_bytes = 8192;
  uint32_t max_trailer_bytes = 8192;
  // A connection waiting this long for (the rest of) a request's header, e.g. idle between
  // keep-alive requests or a slowloris client, is closed.
  std::chrono::seconds idle_timeout{75};
  // A body whose next bytes take longer than this to arrive is abandoned and the connection closed.
  std::chrono::seconds body_timeout{60};
  // Open connections at most; at the limit new ones wait in the listen backlog until one closes.
  // The limit is also kept `fd_headroom` below the process's open-file limit (RLIMIT_NOFILE), so
  // the models, the cache and gRPC keep descriptors to work with.
  int max_connections = 4096;
  int fd_headroom = 128;
  DecodeLimits limits;
  // HTTPS (TLS 1.2+) when a certificate is given; mutual TLS with a client CA.
  TlsFiles tls;
  // When 0 or more: a second listener on this port (0 picks a free one; ui_port() says which)
  // that serves only the status page and its JSON (status_page.h), with the same TLS, limits and
  // --restricted-api rules (kiln serve --ui-port). The page is on `port` as well.
  int ui_port = -1;
  // Serve only the status page and its JSON; other paths are 404 (what the ui_port listener does).
  bool status_page_only = false;
  // Serve GET /metrics alone, every other path 404 (kiln serve --metrics-port).
  bool metrics_only = false;
  // The GPUs whose gauges /metrics shows (NvmlReader); null: none.
  std::shared_ptr<const GpuReader> gpus;
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
  // The status page's own port (HttpServerOptions::ui_port); 0 when it has none.
  uint16_t ui_port() const;
  // The connection limit in force: max_connections, lowered to fit the open-file limit.
  int max_connections() const;
  // Connections open now.
  int connections() const;

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
