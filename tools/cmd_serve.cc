// SPDX-License-Identifier: Apache-2.0
// `kiln serve`: serves a model repository over KServe v2 HTTP and gRPC until SIGINT or SIGTERM,
// then drains the requests in flight and exits 0.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/malloc_reuse.h"
#include "core/progress.h"
#include "server/core/nvml.h"
#include "server/core/server.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"
#include "server/http/otlp_exporter.h"
#include "tools/command.h"

namespace kiln::tools {

namespace {

struct ServeOptions {
  std::string repository;
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;  // -1: no gRPC
  int ui_port = -1;      // -1: the status page is on the HTTP port only
  int threads = 0;
  std::vector<std::string> models;
  uint64_t max_body_mib = 256;
  double poll_secs = 0;
  uint32_t max_header_bytes = 8192;
  uint32_t max_trailer_bytes = 8192;
  int idle_timeout_secs = 75;
  int body_timeout_secs = 60;
  int max_connections = 4096;
  int fd_headroom = 128;
  int64_t max_instances = 64;
  std::string model_control = "none";
  std::vector<std::string> restricted_api;
  server::TlsFiles tls;
  std::string trace_endpoint;  // empty: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else no export
  std::string trace_level;     // empty: TIMESTAMPS when traces are exported, else OFF
  int64_t trace_rate = 1000;
  int64_t trace_count = -1;
  int metrics_port = -1;  // -1: /metrics on the HTTP port only
};

// The tracer the options ask for, and the OTLP exporter it sends to (when there is an endpoint).
Result<std::shared_ptr<server::Tracer>> make_tracer(
    const ServeOptions& o, std::shared_ptr<server::http::OtlpExporter>* exporter) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  std::string url;
  if (!o.trace_endpoint.empty()) {
    url = server::http::otlp_traces_url(o.trace_endpoint);
  } else if (!env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").empty()) {
    url = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");  // the full URL, as OpenTelemetry reads it
  } else if (!env("OTEL_EXPORTER_OTLP_ENDPOINT").empty()) {
    url = server::http::otlp_traces_url(env("OTEL_EXPORTER_OTLP_ENDPOINT"));
  }
  server::TraceSettings settings;
  settings.level = o.trace_level == "TIMESTAMPS" || (o.trace_level.empty() && !url.empty())
                       ? server::TraceLevel::kTimestamps
                       : server::TraceLevel::kOff;
  settings.rate = o.trace_rate;
  settings.count = o.trace_count;
  if (!url.empty()) {
    server::http::OtlpExporterOptions eo;
    eo.url = url;
    if (!env("OTEL_SERVICE_NAME").empty()) eo.service_name = env("OTEL_SERVICE_NAME");
    KILN_ASSIGN_OR_RETURN(*exporter, server::http::OtlpExporter::start(eo));
  }
  return server::Tracer::create({settings, *exporter, url});
}

// The soft open-file limit raised to the hard one (as Go programs and nginx do): connections are
// descriptors, and a soft limit of 1024 is a common default.
void raise_open_file_limit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
}

int serve(const ServeOptions& o) {
  // Every thread started from here on inherits the blocked signals; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  raise_open_file_limit();
  // Request tensors are allocated and freed at the request rate: keep their pages.
  keep_freed_memory_for_reuse();
  server::ServerOptions so;
  so.repository = o.repository;
  so.max_instances = o.max_instances;
  so.model_control =
      o.model_control == "explicit" ? server::ModelControl::kExplicit : server::ModelControl::kNone;
  Result<server::AccessPolicy> access = server::AccessPolicy::parse(o.restricted_api);
  if (!access.ok()) return report_error(access.status());
  so.access = std::move(access).value();
  so.load_all = o.models.empty();
  so.load_models = o.models;
  so.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(o.poll_secs * 1000));
  std::shared_ptr<server::http::OtlpExporter> exporter;
  Result<std::shared_ptr<server::Tracer>> tracer = make_tracer(o, &exporter);
  if (!tracer.ok()) return report_error(tracer.status());
  so.tracer = *tracer;
  // GPU gauges where NVIDIA's driver is installed; none (and no error) elsewhere.
  Result<std::unique_ptr<server::NvmlReader>> nvml = server::NvmlReader::open();
  std::shared_ptr<const server::GpuReader> gpus;
  if (nvml.ok()) gpus = std::move(nvml).value();
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
  ho.max_header_bytes = o.max_header_bytes;
  ho.max_trailer_bytes = o.max_trailer_bytes;
  ho.idle_timeout = std::chrono::seconds(o.idle_timeout_secs);
  ho.body_timeout = std::chrono::seconds(o.body_timeout_secs);
  ho.max_connections = o.max_connections;
  ho.fd_headroom = o.fd_headroom;
  ho.tls = o.tls;
  ho.ui_port = o.ui_port;
  ho.gpus = gpus;
  Result<std::unique_ptr<server::http::HttpServer>> http =
      server::http::HttpServer::start(server->get(), ho);
  if (!http.ok()) return report_error(http.status());
  std::unique_ptr<server::http::HttpServer> metrics;
  if (o.metrics_port >= 0) {  // plain HTTP, /metrics alone (Triton's 8002)
    server::http::HttpServerOptions mo;
    mo.address = o.host;
    mo.port = static_cast<uint16_t>(o.metrics_port);
    mo.threads = 1;
    mo.metrics_only = true;
    mo.gpus = gpus;
    Result<std::unique_ptr<server::http::HttpServer>> started =
        server::http::HttpServer::start(server->get(), mo);
    if (!started.ok()) return report_error(started.status());
    metrics = std::move(started).value();
    fmt::print("kiln serve: metrics on http://{}:{}/metrics\n", o.host, metrics->port());
  }
  if (exporter) {
    fmt::print("kiln serve: traces to {} (level {}, 1 in {} new traces)\n", exporter->url(),
               (*tracer)->settings().at("trace_level")[0], o.trace_rate);
  }
  std::unique_ptr<server::grpc::GrpcServer> grpc;
  if (o.grpc_port >= 0) {
    server::grpc::GrpcServerOptions go;
    go.address = o.host;
    go.port = static_cast<uint16_t>(o.grpc_port);
    go.tls = o.tls;
    go.max_message_bytes =
        static_cast<int64_t>(std::min<uint64_t>(o.max_body_mib << 20, INT32_MAX));
    Result<std::unique_ptr<server::grpc::GrpcServer>> started =
        server::grpc::GrpcServer::start(server->get(), go);
    if (!started.ok()) return report_error(started.status());
    grpc = std::move(started).value();
    fmt::print("kiln serve: listening on grpc{}://{}:{}\n", o.tls.enabled() ? "s" : "", o.host,
               grpc->port());
  }
  fmt::print("kiln serve: listening on http{}://{}:{}\n", o.tls.enabled() ? "s" : "", o.host,
             (*http)->port());
  if (o.ui_port >= 0) {
    fmt::print("kiln serve: status page on http{}://{}:{}/\n", o.tls.enabled() ? "s" : "", o.host,
               (*http)->ui_port());
  }
  std::fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  fmt::print("kiln serve: {} received, draining requests in flight\n",
             signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*server)->shutdown();
  if (grpc) grpc->stop();
  (*http)->stop();
  if (metrics) metrics->stop();
  if (exporter) exporter->stop();  // sends the spans still queued
  fmt::print("kiln serve: stopped\n");
  return 0;
}

}  // namespace

CommandAction add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve a model repository over KServe v2 HTTP and gRPC (see docs/server.md)");
  sub->add_option("--repository,--model-repository", o->repository,
                  "Folder of models: <model>/config.toml and <model>/<version>/")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("--http-port", o->http_port, "HTTP port (0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--grpc-port", o->grpc_port, "gRPC port (0 picks a free one, -1: no gRPC)")
      ->check(CLI::Range(-1, 65535));
  sub->add_option("--ui-port", o->ui_port,
                  "Also serve the status page (and its JSON) on this port alone (0 picks a free "
                  "one); it is always at / on the HTTP port")
      ->check(CLI::Range(0, 65535));
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
  sub->add_option("--max-header-bytes", o->max_header_bytes,
                  "Largest HTTP request line + header fields; larger ones get 431")
      ->check(CLI::Range(512, 65535));
  sub->add_option(
         "--max-trailer-bytes", o->max_trailer_bytes,
         "Largest chunk lines + trailer fields of a chunked HTTP body; larger ones get 431")
      ->check(CLI::Range(512, 65535));
  sub->add_option("--idle-timeout-secs", o->idle_timeout_secs,
                  "Close an HTTP connection that takes longer than this to send a request's header "
                  "(idle keep-alive connections and slow clients)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--body-timeout-secs", o->body_timeout_secs,
                  "Close an HTTP connection whose request body stalls this long between reads")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-connections", o->max_connections,
                  "Open HTTP connections at most (also kept --fd-headroom below the open-file "
                  "limit); more wait in the listen backlog")
      ->check(CLI::PositiveNumber);
  sub->add_option("--fd-headroom", o->fd_headroom,
                  "File descriptors kept free of HTTP connections for models, caches and gRPC")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--model-control-mode", o->model_control,
                  "none: models cannot be loaded or unloaded over the network (the default); "
                  "explicit: the repository and worker load/unload endpoints are open (see "
                  "docs/security.md)")
      ->check(CLI::IsMember({"none", "explicit"}));
  sub->add_option("--restricted-api", o->restricted_api,
                  "GROUP[,GROUP...]:HEADER=VALUE: calls to these endpoint groups (health, "
                  "metadata, inference, model-repository, statistics, trace) must carry the header "
                  "(HTTP) or metadata (gRPC) with this value, else 401 / UNAUTHENTICATED; "
                  "repeatable (Triton's --http-restricted-api)");
  sub->add_option("--trace-otlp-endpoint", o->trace_endpoint,
                  "Send traces over OTLP/HTTP (JSON) to this collector: http://HOST:PORT, spans "
                  "POSTed to its /v1/traces (default: OTEL_EXPORTER_OTLP_ENDPOINT)");
  sub->add_option("--trace-level", o->trace_level,
                  "OFF or TIMESTAMPS (default: TIMESTAMPS when traces are sent, else OFF)")
      ->check(CLI::IsMember({"OFF", "TIMESTAMPS"}));
  sub->add_option("--trace-rate", o->trace_rate,
                  "Sample 1 in R new traces: the 1st, (R+1)th, ... (Triton's trace rate); a "
                  "request's own traceparent decides for itself")
      ->check(CLI::PositiveNumber);
  sub->add_option("--trace-count", o->trace_count, "Sample at most N traces (-1: no limit)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  sub->add_option("--metrics-port", o->metrics_port,
                  "Also serve GET /metrics alone on this plain-HTTP port (0 picks a free one; "
                  "default: /metrics on the HTTP port only)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--tls-cert", o->tls.cert_file,
                  "PEM certificate chain: serve HTTPS and gRPC over TLS (with --tls-key)")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-key", o->tls.key_file, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-client-ca", o->tls.client_ca_file,
                  "PEM CA: require client certificates it signed (mutual TLS)")
      ->check(CLI::ExistingFile);
  sub->add_option("--max-instances", o->max_instances,
                  "Most instances (threads) one model version may ask for")
      ->check(CLI::PositiveNumber);
  return [o] {
    set_progress_sink(nullptr);  // a server's compiles show in its log, not as terminal bars
    return serve(*o);
  };
}

}  // namespace kiln::tools
