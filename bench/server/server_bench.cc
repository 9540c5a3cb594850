// SPDX-License-Identifier: Apache-2.0
// Per-request overhead of the server with the echo model at concurrency 1: in-process (the
// Server API), over HTTP on loopback (binary and JSON tensors) and over gRPC on loopback (raw and
// typed contents), as p50/p90/p99 microseconds. Targets: p50 <= 60 us in-process, <= 120 us over
// HTTP and gRPC (amdinfer measured 194 us over HTTP and 239 us over gRPC).
//   build/release/bench/server/server_bench --benchmark_out=server.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "client/grpc_client.h"
#include "client/http_client.h"
#include "client/native_client.h"
#include "server/core/server.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

// One server (repository with an echo model) and its HTTP and gRPC transports, shared by every
// benchmark.
struct Fixture {
  Fixture() {
    root = fs::temp_directory_path() / ("kiln_bench_repo_" + std::to_string(::getpid()));
    fs::create_directories(root / "echo" / "1");
    std::ofstream(root / "echo" / "config.toml") << "backend = \"echo\"\n";
    server = std::move(Server::create({root, true, {}})).value();
    http::HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.threads = 2;
    http = std::move(http::HttpServer::start(server.get(), o)).value();
    grpc::GrpcServerOptions g;
    g.address = "127.0.0.1";
    g.port = 0;
    grpc = std::move(grpc::GrpcServer::start(server.get(), g)).value();
  }
  ~Fixture() {
    server->shutdown();
    grpc.reset();
    http.reset();
    server.reset();
    fs::remove_all(root);
  }
  fs::path root;
  std::unique_ptr<Server> server;
  std::unique_ptr<http::HttpServer> http;
  std::unique_ptr<grpc::GrpcServer> grpc;
};

Fixture& fixture() {
  static Fixture* f = new Fixture();
  return *f;
}

InferenceRequest echo_request(int64_t elements) {
  InferenceRequest r;
  r.model = "echo";
  std::vector<float> v(static_cast<size_t>(elements), 1.f);
  r.inputs.push_back({"x", Tensor::from_vector<float>(v), {}});
  return r;
}

// Times every iteration and reports the percentiles as counters (microseconds).
template <class F>
void run_timed(benchmark::State& state, F&& one) {
  std::vector<double> us;
  us.reserve(100000);
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    if (!one()) {
      state.SkipWithError("request failed");
      return;
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[static_cast<size_t>(p * static_cast<double>(us.size() - 1))];
  };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p90_us"] = pct(0.90);
  state.counters["p99_us"] = pct(0.99);
  state.counters["elements"] = static_cast<double>(state.range(0));
}

void BM_EchoInProcess(benchmark::State& state) {
  client::NativeClient c(fixture().server.get());
  InferenceRequest r = echo_request(state.range(0));
  run_timed(state, [&] { return c.model_infer("echo", r).ok(); });
}

void BM_EchoHttpBinary(benchmark::State& state) {
  auto c =
      std::move(client::HttpClient::create("127.0.0.1:" + std::to_string(fixture().http->port())))
          .value();
  InferenceRequest r = echo_request(state.range(0));
  run_timed(state, [&] { return c->model_infer("echo", r).ok(); });
}

void BM_EchoHttpJson(benchmark::State& state) {
  client::HttpClientOptions o;
  o.binary_inputs = o.binary_outputs = false;
  auto c = std::move(
               client::HttpClient::create("127.0.0.1:" + std::to_string(fixture().http->port()), o))
               .value();
  InferenceRequest r = echo_request(state.range(0));
  run_timed(state, [&] { return c->model_infer("echo", r).ok(); });
}

void BM_EchoGrpc(benchmark::State& state, bool raw) {
  client::GrpcClientOptions o;
  o.raw_inputs = o.raw_outputs = raw;
  auto c = std::move(
               client::GrpcClient::create("127.0.0.1:" + std::to_string(fixture().grpc->port()), o))
               .value();
  InferenceRequest r = echo_request(state.range(0));
  run_timed(state, [&] { return c->model_infer("echo", r).ok(); });
}
void BM_EchoGrpcRaw(benchmark::State& state) {
  BM_EchoGrpc(state, true);
}
void BM_EchoGrpcTyped(benchmark::State& state) {
  BM_EchoGrpc(state, false);
}

BENCHMARK(BM_EchoInProcess)->Arg(1)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_EchoHttpBinary)->Arg(1)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_EchoHttpJson)->Arg(1)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_EchoGrpcRaw)->Arg(1)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_EchoGrpcTyped)->Arg(1)->Arg(1024)->MinTime(2.0)->UseRealTime();

}  // namespace
}  // namespace kiln::server

BENCHMARK_MAIN();
