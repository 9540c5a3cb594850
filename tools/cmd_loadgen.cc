// SPDX-License-Identifier: Apache-2.0
// `kiln loadgen`: drives a served model (HTTP, gRPC, or an in-process server) at a concurrency
// sweep or a request rate and reports throughput, latency percentiles, failures and the server's
// queue/compute split (perf_analyzer's job).
#include <fmt/format.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "client/grpc_client.h"
#include "client/http_client.h"
#include "client/native_client.h"
#include "core/malloc_reuse.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "server/core/server.h"
#include "tools/command.h"
#include "tools/model_io.h"

namespace kiln::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string url;
  std::string protocol = "http";
  std::string repository;  // native: the repository of the in-process server
  std::string model;
  std::string version;
  std::vector<int> concurrency{1};
  double request_rate = 0;  // requests/s; 0: the concurrency sweep
  int max_inflight = 64;    // senders of the request-rate mode
  double duration_s = 5;
  double warmup_s = 1;
  int64_t batch = 1;
  std::vector<std::string> inputs;  // NAME=FILE.npy, or NAME=FILE for a BYTES input
  std::vector<std::string> shapes;  // NAME=dims for variable dims other than the batch
  uint64_t seed = 0;
  std::string stats_url;  // where the server's statistics are (http://...), for gRPC
  std::string json;       // write the results here ("-": stdout)
  int grpc_connections = 0;  // gRPC connections the senders share; 0: one per 8 senders
};

// What the statistics extension said, summed over the model's versions.
struct ServerStats {
  uint64_t inferences = 0, executions = 0, queue_count = 0, queue_ns = 0, compute_count = 0,
           compute_ns = 0;
};

struct Level {
  int concurrency = 0;
  double rate = 0;
  int64_t requests = 0, failures = 0;
  double seconds = 0;
  std::vector<int64_t> latencies_us;
  std::map<std::string, int64_t> errors;
  std::optional<ServerStats> server;  // the delta over the measurement
};

int64_t percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// One request's inputs from the model's metadata: files where given, else seeded random data.
Result<server::InferenceRequest> make_request(const server::ModelMetadata& meta, const Options& o) {
  std::map<std::string, std::string> files;
  for (const std::string& spec : o.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      return invalid_argument_error(fmt::format("--input {}: expected NAME=FILE", spec));
    }
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  KILN_ASSIGN_OR_RETURN(auto shapes, parse_input_shapes(o.shapes));
  std::mt19937_64 rng(o.seed);
  server::InferenceRequest request;
  for (const server::TensorMetadata& t : meta.inputs) {
    auto file = files.find(t.name);
    if (file != files.end() && t.dtype != DType::kString) {
      KILN_ASSIGN_OR_RETURN(Tensor data, read_npy(file->second));
      request.inputs.push_back({t.name, std::move(data), {}});
      files.erase(file);
      continue;
    }
    std::vector<int64_t> dims = t.shape;
    if (auto s = shapes.find(t.name); s != shapes.end()) dims = s->second;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) continue;
      if (i != 0) {
        return invalid_argument_error(
            fmt::format("input \"{}\" has the variable shape {}; give it with --shape {}=DIMS",
                        t.name, server::dims_to_string(t.shape), t.name));
      }
      dims[i] = o.batch;
    }
    KILN_ASSIGN_OR_RETURN(Tensor data, Tensor::allocate(t.dtype, Shape(dims)));
    if (t.dtype == DType::kString) {
      std::string bytes;
      if (file != files.end()) {
        KILN_ASSIGN_OR_RETURN(bytes, read_file(file->second));
        files.erase(file);
      } else {
        for (int i = 0; i < 16; ++i) bytes += static_cast<char>('a' + rng() % 26);
      }
      for (std::string& s : data.span<std::string>()) s = bytes;
    } else {
      auto* p = static_cast<uint8_t*>(data.raw_data());
      if (t.dtype == DType::kF32) {
        std::uniform_real_distribution<float> u(0.f, 1.f);
        for (float& v : data.span<float>()) v = u(rng);
      } else {
        for (size_t i = 0; i < data.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng() % 2);
      }
    }
    request.inputs.push_back({t.name, std::move(data), {}});
  }
  if (!files.empty()) {
    return invalid_argument_error(
        fmt::format("--input {}: the model has no such input", files.begin()->first));
  }
  return request;
}

Result<ServerStats> parse_stats_json(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("model_stats")) {
    return invalid_argument_error("the statistics reply is not the statistics extension's JSON");
  }
  ServerStats s;
  auto u = [](const rapidjson::Value& v, const char* k) -> uint64_t {
    return v.HasMember(k) && v[k].IsNumber() ? v[k].GetUint64() : 0;
  };
  for (const auto& m : doc["model_stats"].GetArray()) {
    s.inferences += u(m, "inference_count");
    s.executions += u(m, "execution_count");
    if (!m.HasMember("inference_stats")) continue;
    const auto& st = m["inference_stats"];
    if (st.HasMember("queue"))
      s.queue_count += u(st["queue"], "count"), s.queue_ns += u(st["queue"], "ns");
    if (st.HasMember("compute_infer")) {
      s.compute_count += u(st["compute_infer"], "count");
      s.compute_ns += u(st["compute_infer"], "ns");
    }
  }
  return s;
}

class Runner {
 public:
  Status open(const Options& o) {
    o_ = o;
    if (o.protocol == "native") {
      if (o.repository.empty()) {
        return invalid_argument_error(
            "--protocol native needs --repository DIR (an in-process "
            "server is started on it)");
      }
      server::ServerOptions so;
      so.repository = o.repository;
      so.load_all = false;
      so.load_models = {o.model};
      KILN_ASSIGN_OR_RETURN(server_, server::Server::create(so));
      client_ = std::make_unique<client::NativeClient>(server_.get());
    } else if (o.protocol == "http") {
      KILN_ASSIGN_OR_RETURN(auto http, client::HttpClient::create(o.url));
      client_ = std::move(http);
    } else if (o.protocol == "grpc") {
      // Several connections, as Triton's client library opens (it shares a channel among at most
      // 6 clients): one HTTP/2 connection would cap the throughput, not the server.
      const int senders = o.request_rate > 0
                              ? o.max_inflight
                              : *std::max_element(o.concurrency.begin(), o.concurrency.end());
      const int connections =
          o.grpc_connections > 0 ? o.grpc_connections : std::max(1, (senders + 7) / 8);
      client::GrpcClientOptions options;
      options.own_connection = connections > 1;
      for (int c = 0; c < connections; ++c) {
        KILN_ASSIGN_OR_RETURN(auto grpc, client::GrpcClient::create(o.url, options));
        if (c == 0) {
          client_ = std::move(grpc);
        } else {
          extra_clients_.push_back(std::move(grpc));
        }
      }
    } else {
      return invalid_argument_error(
          fmt::format("--protocol: expected http, grpc or native, got \"{}\"", o.protocol));
    }
    std::string stats = o.stats_url.empty() && o.protocol == "http" ? o.url : o.stats_url;
    if (!stats.empty()) {
      KILN_ASSIGN_OR_RETURN(stats_client_, client::HttpClient::create(stats));
    }
    KILN_RETURN_IF_ERROR(client_->wait_until_server_ready(std::chrono::seconds(60)));
    KILN_ASSIGN_OR_RETURN(meta_, client_->model_metadata(o.model, o.version));
    KILN_ASSIGN_OR_RETURN(request_, make_request(meta_, o));
    request_.version = o.version;
    // One request first: a model that refuses it fails here with the server's message.
    KILN_ASSIGN_OR_RETURN(auto first, client_->model_infer(o.model, request_));
    (void)first;
    return Status();
  }

  std::optional<ServerStats> server_stats() {
    if (server_) {
      ServerStats s;
      Result<std::vector<server::ModelStatistics>> all = server_->statistics(o_.model);
      if (!all.ok()) return std::nullopt;
      for (const auto& m : *all) {
        s.inferences += m.inference_count;
        s.executions += m.execution_count;
        s.queue_count += m.queue.count;
        s.queue_ns += m.queue.ns;
        s.compute_count += m.compute.count;
        s.compute_ns += m.compute.ns;
      }
      return s;
    }
    if (!stats_client_) return std::nullopt;
    Result<client::HttpReply> r =
        stats_client_->send("GET", fmt::format("/v2/models/{}/stats", o_.model));
    if (!r.ok() || r->status != 200) return std::nullopt;
    Result<ServerStats> s = parse_stats_json(r->body);
    return s.ok() ? std::optional<ServerStats>(*s) : std::nullopt;
  }

  // Runs `senders` threads for warmup + duration; with a rate, sender k's n-th request is due at
  // start + (n * senders + k) / rate and its latency counts from then (no coordinated omission).
  Level run(int senders, double rate) {
    Level level;
    level.concurrency = rate > 0 ? 0 : senders;
    level.rate = rate;
    std::mutex mutex;
    std::atomic<int64_t> ticket{0};
    const Clock::time_point start = Clock::now();
    const Clock::time_point measure = start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(o_.warmup_s));
    const Clock::time_point end = measure + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(o_.duration_s));
    std::optional<ServerStats> before;
    std::vector<std::thread> threads;
    for (int k = 0; k < senders; ++k) {
      // Sender k's connection (gRPC opens several; the others share one client).
      const size_t pick = static_cast<size_t>(k) % (extra_clients_.size() + 1);
      client::Client* sender = pick == 0 ? client_.get() : extra_clients_[pick - 1].get();
      threads.emplace_back([&, sender] {
        std::vector<int64_t> latencies;
        std::map<std::string, int64_t> errors;
        int64_t ok = 0, failed = 0;
        while (true) {
          Clock::time_point due = Clock::now();
          if (rate > 0) {
            const int64_t n = ticket.fetch_add(1);
            due = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(static_cast<double>(n) / rate));
            if (due >= end) break;
            std::this_thread::sleep_until(due);
          } else if (due >= end) {
            break;
          }
          Result<server::InferenceResponse> r = sender->model_infer(o_.model, request_);
          const Clock::time_point done = Clock::now();
          // perf_analyzer's rule: a request counts when it ends inside the window. Counting only
          // those sent inside it too undercounts the throughput by latency / duration (the
          // requests in flight when the window opens), 10% for 2 s batches in a 20 s window.
          if (done < measure || done > end) continue;
          if (r.ok()) {
            ++ok;
            latencies.push_back(
                std::chrono::duration_cast<std::chrono::microseconds>(done - due).count());
          } else {
            ++failed;
            ++errors[std::string(r.status().message()).substr(0, 160)];
          }
        }
        std::lock_guard lock(mutex);
        level.requests += ok + failed;
        level.failures += failed;
        level.latencies_us.insert(level.latencies_us.end(), latencies.begin(), latencies.end());
        for (const auto& [m, c] : errors) level.errors[m] += c;
      });
    }
    // The server's figures over the same window.
    std::this_thread::sleep_until(measure);
    before = server_stats();
    std::this_thread::sleep_until(end);
    std::optional<ServerStats> after = server_stats();
    for (std::thread& t : threads) t.join();
    level.seconds = o_.duration_s;
    if (before && after) {
      ServerStats d;
      d.inferences = after->inferences - before->inferences;
      d.executions = after->executions - before->executions;
      d.queue_count = after->queue_count - before->queue_count;
      d.queue_ns = after->queue_ns - before->queue_ns;
      d.compute_count = after->compute_count - before->compute_count;
      d.compute_ns = after->compute_ns - before->compute_ns;
      level.server = d;
    }
    std::sort(level.latencies_us.begin(), level.latencies_us.end());
    return level;
  }

 private:
  Options o_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<client::Client> client_;
  std::vector<std::unique_ptr<client::Client>> extra_clients_;
  std::unique_ptr<client::HttpClient> stats_client_;
  server::ModelMetadata meta_;
  server::InferenceRequest request_;
};

double per(uint64_t ns, uint64_t count) {
  return count == 0 ? 0.0 : static_cast<double>(ns) / static_cast<double>(count) / 1000.0;
}

std::string level_json(const Level& l, int64_t batch) {
  const double ok = static_cast<double>(l.requests - l.failures);
  std::string server = "null";
  if (l.server) {
    const ServerStats& s = *l.server;
    server = fmt::format(
        "{{\"inferences\":{},\"executions\":{},\"avg_batch\":{:.3f},\"queue_us\":{:.2f},"
        "\"compute_us_per_batch\":{:.2f}}}",
        s.inferences, s.executions,
        s.executions ? static_cast<double>(s.inferences) / static_cast<double>(s.executions) : 0.0,
        per(s.queue_ns, s.queue_count), per(s.compute_ns, s.compute_count));
  }
  std::string errors;
  for (const auto& [m, c] : l.errors) {
    errors += fmt::format("{}{{\"message\":\"{}\",\"count\":{}}}", errors.empty() ? "" : ",",
                          json_escape(m), c);
  }
  const auto& lat = l.latencies_us;
  return fmt::format(
      "{{\"concurrency\":{},\"request_rate\":{},\"seconds\":{},\"requests\":{},\"failures\":{},"
      "\"requests_per_s\":{:.3f},\"infer_per_s\":{:.3f},\"p50_us\":{},\"p90_us\":{},"
      "\"p99_us\":{},\"max_us\":{},\"server\":{},\"errors\":[{}]}}",
      l.concurrency, l.rate, l.seconds, l.requests, l.failures, ok / l.seconds,
      ok * static_cast<double>(batch) / l.seconds, percentile(lat, 0.5), percentile(lat, 0.9),
      percentile(lat, 0.99), lat.empty() ? 0 : lat.back(), server, errors);
}

int run_loadgen(const Options& o) {
  // Answers (and, with --protocol native, the server's request tensors) are allocated and freed at
  // the request rate: keep their pages, as `kiln serve` does.
  keep_freed_memory_for_reuse();
  Runner runner;
  if (Status s = runner.open(o); !s.ok()) return report_error(s);
  std::vector<Level> levels;
  if (o.request_rate > 0) {
    levels.push_back(runner.run(o.max_inflight, o.request_rate));
  } else {
    for (int c : o.concurrency) levels.push_back(runner.run(c, 0));
  }
  const bool to_stdout = o.json == "-";
  if (!to_stdout) {
    fmt::print("{} over {}{}: batch {}, {} s per level after {} s warm-up\n", o.model, o.protocol,
               o.url.empty() ? "" : " at " + o.url, o.batch, o.duration_s, o.warmup_s);
    fmt::print("{:>11} {:>9} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11}\n",
               o.request_rate > 0 ? "rate/s" : "concurrency", "requests", "infer/s", "req/s",
               "p50_us", "p90_us", "p99_us", "failures", "avg_batch", "queue_us", "compute_us");
    for (const Level& l : levels) {
      const double ok = static_cast<double>(l.requests - l.failures);
      const auto& lat = l.latencies_us;
      std::string avg = "-", queue = "-", compute = "-";
      if (l.server && l.server->executions) {
        avg = fmt::format("{:.2f}", static_cast<double>(l.server->inferences) /
                                        static_cast<double>(l.server->executions));
        queue = fmt::format("{:.0f}", per(l.server->queue_ns, l.server->queue_count));
        compute = fmt::format("{:.0f}", per(l.server->compute_ns, l.server->compute_count));
      }
      fmt::print("{:>11} {:>9} {:>12.1f} {:>10.1f} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11}\n",
                 o.request_rate > 0 ? fmt::format("{}", l.rate) : std::to_string(l.concurrency),
                 l.requests, ok * static_cast<double>(o.batch) / l.seconds, ok / l.seconds,
                 percentile(lat, 0.5), percentile(lat, 0.9), percentile(lat, 0.99), l.failures, avg,
                 queue, compute);
      for (const auto& [m, c] : l.errors) fmt::print("    {} x {}\n", c, m);
    }
  }
  if (!o.json.empty()) {
    std::string rows;
    for (const Level& l : levels) rows += (rows.empty() ? "" : ",") + level_json(l, o.batch);
    std::string text = fmt::format(
        "{{\"model\":\"{}\",\"protocol\":\"{}\",\"url\":\"{}\",\"batch\":{},\"duration_s\":{},"
        "\"warmup_s\":{},\"levels\":[{}]}}\n",
        json_escape(o.model), o.protocol, json_escape(o.url), o.batch, o.duration_s, o.warmup_s,
        rows);
    if (to_stdout) {
      fmt::print("{}", text);
    } else {
      std::ofstream out(o.json);
      out << text;
      if (!out.good()) {
        return report_error(errno_error(errno, fmt::format("--json: cannot write \"{}\"", o.json)));
      }
    }
  }
  int64_t failures = 0;
  for (const Level& l : levels) failures += l.failures;
  return failures == 0 ? 0 : 1;
}

}  // namespace

CommandAction add_loadgen_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "loadgen",
      "Load a served model (HTTP, gRPC or in-process) at a concurrency sweep or a request rate: "
      "throughput, p50/p90/p99 latency, failures, the server's queue/compute split");
  cmd->add_option("--model", o->model, "the model to load")->required();
  cmd->add_option("--version", o->version, "its version (default the newest)");
  cmd->add_option("--protocol", o->protocol, "http, grpc, or native (an in-process server)")
      ->capture_default_str();
  cmd->add_option("--url", o->url, "http://host:port, or host:port for grpc");
  cmd->add_option("--repository", o->repository, "native: the repository to serve in-process");
  cmd->add_option("--concurrency", o->concurrency,
                  "requests in flight, one level each (e.g. --concurrency 1 4 16)")
      ->delimiter(',');
  cmd->add_option(
      "--request-rate", o->request_rate,
      "requests per second instead (constant intervals), latency from when each is due");
  cmd->add_option("--max-inflight", o->max_inflight, "senders in the request-rate mode")
      ->capture_default_str();
  cmd->add_option("--grpc-connections", o->grpc_connections,
                  "gRPC connections the senders share (0: one per 8 senders)")
      ->capture_default_str();
  cmd->add_option("--duration", o->duration_s, "seconds measured per level")->capture_default_str();
  cmd->add_option("--warmup", o->warmup_s, "seconds before measuring")->capture_default_str();
  cmd->add_option("--batch", o->batch, "size of each request's variable first dim")
      ->capture_default_str();
  cmd->add_option("--input", o->inputs,
                  "NAME=FILE.npy, or NAME=FILE for a BYTES input (e.g. an image's bytes); "
                  "others are random");
  cmd->add_option("--shape", o->shapes, "NAME=DIMS for variable dims after the first");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--stats-url", o->stats_url,
                  "HTTP address to read server statistics from (default: --url for http)");
  cmd->add_option("--json", o->json,
                  "write the results as JSON to this file, or with no file (or -) print only the "
                  "JSON object")
      ->expected(0, 1)
      ->default_str("-");
  return [o] {
    if (o->protocol != "native" && o->url.empty()) {
      return report_error(invalid_argument_error("--url is required unless --protocol native"));
    }
    return run_loadgen(*o);
  };
}

}  // namespace kiln::tools
