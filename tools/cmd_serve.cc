// SPDX-License-Identifier: Apache-2.0
// `kiln serve`: serves a model repository over KServe v2 HTTP and gRPC until SIGINT or SIGTERM,
// then drains the requests in flight and exits 0.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "server/core/server.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"
#include "tools/command.h"

namespace kiln::tools {

namespace {

struct ServeOptions {
  std::string repository;
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;  // -1: no gRPC
  int threads = 0;
  std::vector<std::string> models;
  uint64_t max_body_mib = 256;
  double poll_secs = 0;
};

int serve(const ServeOptions& o) {
  // Every thread started from here on inherits the blocked signals; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerOptions so;
  so.repository = o.repository;
  so.load_all = o.models.empty();
  so.load_models = o.models;
  so.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(o.poll_secs * 1000));
  Result<std::unique_ptr<server::Server>> server = server::Server::create(so);
  if (!server.ok()) return report_error(server.status());
  for (const server::RepositoryEntry& e : (*server)->repository_index()) {
    if (e.state == "READY") {
      fmt::print("kiln serve: model {} version {} is ready\n", e.name, e.version);
    } else if (!e.reason.empty()) {
      fmt::print(stderr, "kiln serve: model {} is {}: {}\n", e.name, e.state, e.reason);
    }
  }
  server::http::HttpServerOptions ho;
  ho.address = o.host;
  ho.port = static_cast<uint16_t>(o.http_port);
  ho.threads = o.threads;
  ho.max_body_bytes = o.max_body_mib << 20;
  Result<std::unique_ptr<server::http::HttpServer>> http =
      server::http::HttpServer::start(server->get(), ho);
  if (!http.ok()) return report_error(http.status());
  std::unique_ptr<server::grpc::GrpcServer> grpc;
  if (o.grpc_port >= 0) {
    server::grpc::GrpcServerOptions go;
    go.address = o.host;
    go.port = static_cast<uint16_t>(o.grpc_port);
    go.max_message_bytes =
        static_cast<int64_t>(std::min<uint64_t>(o.max_body_mib << 20, INT32_MAX));
    Result<std::unique_ptr<server::grpc::GrpcServer>> started =
        server::grpc::GrpcServer::start(server->get(), go);
    if (!started.ok()) return report_error(started.status());
    grpc = std::move(started).value();
    fmt::print("kiln serve: listening on grpc://{}:{}\n", o.host, grpc->port());
  }
  fmt::print("kiln serve: listening on http://{}:{}\n", o.host, (*http)->port());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  fmt::print("kiln serve: {} received, draining requests in flight\n",
             signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*server)->shutdown();
  if (grpc) grpc->stop();
  (*http)->stop();
  fmt::print("kiln serve: stopped\n");
  return 0;
}

}  // namespace

CommandAction add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve a model repository over KServe v2 HTTP and gRPC (see docs/server.md)");
  sub->add_option("--repository", o->repository,
                  "Folder of models: <model>/config.toml and <model>/<version>/")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("--http-port", o->http_port, "HTTP port (0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--grpc-port", o->grpc_port, "gRPC port (0 picks a free one, -1: no gRPC)")
      ->check(CLI::Range(-1, 65535));
  sub->add_option("--host", o->host, "Address to listen on");
  sub->add_option("--threads", o->threads, "HTTP threads (0: KILN_NUM_THREADS or one per core)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--model", o->models,
                  "Load only these models at start (default: every model); repeatable");
  sub->add_option("--repository-poll-secs", o->poll_secs,
                  "Rescan the repository this often: load new models, reload changed ones, "
                  "unload removed ones (0: off)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-body-mib", o->max_body_mib,
                  "Largest request body (HTTP) or message (gRPC) in MiB; larger ones get 413 "
                  "or RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber);
  return [o] { return serve(*o); };
}

}  // namespace kiln::tools
