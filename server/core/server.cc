// SPDX-License-Identifier: Apache-2.0
// The server core: the model table, repository scanning, load/unload and request routing.
#include "server/core/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "server/backends/backend.h"

namespace kiln::server {

namespace {

namespace fs = std::filesystem;

// `names` in an order to load them: chains after the models their steps call, a chain after the
// chains it calls; otherwise as given. Chains in a cycle come last, for their load to say why.
std::vector<std::string> load_order(const fs::path& repo, const std::vector<std::string>& names) {
  std::map<std::string, std::vector<std::string>> steps;  // chain -> the models it calls
  for (const std::string& n : names) {
    Result<ModelConfig> c = read_model_config(repo / n);
    if (!c.ok() || c->backend != "chain") continue;
    std::vector<std::string>& called = steps[n];
    for (const ChainStep& step : c->steps) called.push_back(step.model);
  }
  std::vector<std::string> order;
  std::set<std::string> placed, visiting;
  for (const std::string& n : names) {
    if (!steps.contains(n) && placed.insert(n).second) order.push_back(n);
  }
  std::function<void(const std::string&)> place = [&](const std::string& n) {
    if (placed.contains(n) || !steps.contains(n) || !visiting.insert(n).second) return;
    for (const std::string& called : steps[n]) place(called);
    placed.insert(n);
    order.push_back(n);
  };
  for (const std::string& n : names) place(n);
  for (const std::string& n : names) {
    if (placed.insert(n).second) order.push_back(n);
  }
  return order;
}

// The numbered version folders of a model, ascending.
std::vector<int64_t> version_folders(const fs::path& model_dir) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(model_dir, ec)) {
    if (!e.is_directory()) continue;
    std::string n = e.path().filename().string();
    if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    out.push_back(std::stoll(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<int64_t> parse_version(const std::string& name, const std::string& version) {
  char* end = nullptr;
  long long v = std::strtoll(version.c_str(), &end, 10);
  if (version.empty() || *end != '\0' || v < 0) {
    return not_found_error(fmt::format(
        "model \"{}\" has no version \"{}\"; versions are non-negative integers", name, version));
  }
  return static_cast<int64_t>(v);
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(ServerOptions options) {
  if (options.tracer == nullptr) {
    KILN_ASSIGN_OR_RETURN(options.tracer, Tracer::create({}));
  }
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const fs::path& repo = server->options_.repository;
  std::error_code ec;
  const std::vector<std::string> own = backend_names();
  for (const auto& [name, factory] : server->options_.backends) {
    if (std::find(own.begin(), own.end(), name) != own.end() || !factory) {
      return invalid_argument_error(fmt::format(
          "backend \"{}\": {}", name,
          factory ? "the name is one of kiln's own backends; give it another" : "no factory"));
    }
  }
  if (!repo.empty()) {
    if (!fs::is_directory(repo, ec)) {
      return not_found_error(
          fmt::format("model repository {} is not a folder; give --repository a folder holding "
                      "<model>/config.toml and <model>/<version>/",
                      repo.string()));
    }
    server->root_ = fs::canonical(repo, ec);
    if (ec) {
      return not_found_error(fmt::format("model repository {}: {}", repo.string(), ec.message()));
    }
  }
  server->cache_dir_ =
      server->options_.cache_dir.empty() ? default_cache_dir() : server->options_.cache_dir;
  if (!server->root_.empty() && inside_root(server->root_, server->cache_dir_)) {
    log(LogLevel::kWarning,
        "the compile cache {} is inside the model repository {}, which the server never writes "
        "to; compiled models are not cached (set KILN_CACHE_DIR elsewhere)",
        server->cache_dir_.string(), server->root_.string());
    server->cache_dir_.clear();
  }
  if (repo.empty()) return server;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(repo, ec)) {
    std::string n = e.path().filename().string();
    // A folder that links outside the repository is not a model (model_folder says why on load).
    if (e.is_directory() && !n.empty() && n[0] != '.' && inside_root(server->root_, e.path())) {
      names.push_back(n);
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : server->options_.load_models) {
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      return not_found_error(
          fmt::format("model \"{}\" is not in the repository {}", n, repo.string()));
    }
  }
  names = load_order(repo, names);
  // A chain asked for brings the models of its steps (and theirs, for a chain of chains).
  std::set<std::string> wanted_models(server->options_.load_models.begin(),
                                      server->options_.load_models.end());
  for (std::vector<std::string> todo(wanted_models.begin(), wanted_models.end()); !todo.empty();) {
    const std::string n = todo.back();
    todo.pop_back();
    Result<ModelConfig> c = read_model_config(repo / n);
    if (!c.ok() || c->backend != "chain") continue;
    for (const ChainStep& step : c->steps) {
      if (wanted_models.insert(step.model).second) todo.push_back(step.model);
    }
  }
  for (const std::string& n : names) {
    bool wanted = server->options_.load_all || wanted_models.contains(n);
    if (!wanted) {
      std::string signature = server->repository_signature(n);
      std::unique_lock lock(server->mutex_);
      server->models_[n].signature = std::move(signature);
      continue;
    }
    Status s = server->load_model(n);
    if (!s.ok()) log(LogLevel::kError, "{}", s.message());
  }
  if (server->options_.poll_interval.count() > 0) {
    Server* raw = server.get();
    server->poll_thread_ = std::thread([raw] { raw->poll_loop(); });
  }
  return server;
}

Server::~Server() {
  shutdown();
}

std::string Server::repository_signature(const std::string& name) const {
  fs::path dir = options_.repository / name;
  std::string signature;
  for (const char* file : {"config.toml", "config.pbtxt"}) {
    Result<std::string> text = read_file((dir / file).string());
    signature += std::string(file) + "\n" + (text.ok() ? *text : std::string()) + "\n";
  }
  for (int64_t v : version_folders(dir)) signature += std::to_string(v) + ",";
  return signature;
}

void Server::poll_repository() {
  if (options_.repository.empty() || shutting_down_) return;
  std::vector<std::string> present;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.repository, ec)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && !n.empty() && n[0] != '.' && inside_root(root_, e.path())) {
      present.push_back(n);
    }
  }
  std::vector<std::string> to_load, to_unload;
  {
    std::shared_lock lock(mutex_);
    for (const std::string& n : present) {
      auto it = models_.find(n);
      if (it == models_.end() ||
          (!it->second.worker && it->second.signature != repository_signature(n))) {
        to_load.push_back(n);
      }
    }
    for (const auto& [n, e] : models_) {
      if (!e.worker && std::find(present.begin(), present.end(), n) == present.end()) {
        to_unload.push_back(n);
      }
    }
  }
  for (const std::string& n : load_order(options_.repository, to_load)) {
    log(LogLevel::kInfo, "repository: model \"{}\" is new or changed; loading it", n);
    Status s = load_model(n);
    if (!s.ok()) log(LogLevel::kError, "{}", s.message());
  }
  for (const std::string& n : to_unload) {
    log(LogLevel::kInfo, "repository: model \"{}\" was removed; unloading it", n);
    unload_model(n).ignore_error();
    std::unique_lock lock(mutex_);
    models_.erase(n);
  }
}

void Server::poll_loop() {
  std::unique_lock<std::mutex> lock(poll_mutex_);
  while (!shutting_down_) {
    poll_cv_.wait_for(lock, options_.poll_interval, [this] { return shutting_down_.load(); });
    if (shutting_down_) break;
    lock.unlock();
    poll_repository();
    lock.lock();
  }
}

Result<fs::path> Server::model_folder(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return invalid_argument_error(fmt::format("\"{}\" is not a model name", name));
  }
  fs::path dir = options_.repository / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return not_found_error(fmt::format("model \"{}\" is not in the repository {}", name,
                                       options_.repository.string()));
  }
  if (!inside_root(root_, dir)) {
    return permission_denied_error(fmt::format(
        "model \"{}\": its folder {} is a symbolic link to a place outside the model repository "
        "{}; move the model into the repository",
        name, dir.string(), root_.string()));
  }
  return dir;
}

Status Server::model_control_status(std::string_view what) const {
  if (options_.model_control == ModelControl::kExplicit) return Status();
  return permission_denied_error(fmt::format(
      "{}: model management is off; start the server with --model-control-mode explicit to load "
      "and unload models over the network",
      what));
}

bool Server::ready() const {
  if (shutting_down_) return false;
  std::shared_lock lock(mutex_);
  for (const auto& [name, e] : models_) {
    if (e.failed || e.state == "LOADING") return false;
  }
  return true;
}

ServerMetadata Server::metadata() const {
  return {"kiln",
          KILN_SERVER_VERSION,
          {"binary_tensor_data", "model_repository", "model_configuration", "statistics",
           "schedule_policy", "amdinfer_workers", "trace"}};
}

std::vector<std::string> Server::model_names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : models_) {
    if (!e.versions.empty()) out.push_back(name);
  }
  return out;
}

Result<std::shared_ptr<Model>> Server::find(const std::string& name,
                                            const std::string& version) const {
  std::shared_lock lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> loaded = model_names();
    return not_found_error(
        fmt::format("model \"{}\" does not exist; the loaded models are: {}", name,
                    loaded.empty() ? "(none)" : fmt::format("{}", fmt::join(loaded, ", "))));
  }
  const Entry& e = it->second;
  if (e.versions.empty()) {
    return unavailable_error(fmt::format("model \"{}\" is not ready ({}{}{})", name, e.state,
                                         e.reason.empty() ? "" : ": ", e.reason));
  }
  if (version.empty()) return e.versions.rbegin()->second;
  KILN_ASSIGN_OR_RETURN(int64_t v, parse_version(name, version));
  auto vit = e.versions.find(v);
  if (vit == e.versions.end()) {
    std::vector<int64_t> have;
    for (const auto& [n, m] : e.versions) have.push_back(n);
    return not_found_error(
        fmt::format("model \"{}\" has no version {}; the loaded versions are: {}", name, version,
                    fmt::join(have, ", ")));
  }
  return vit->second;
}

Result<bool> Server::model_ready(const std::string& name, const std::string& version) const {
  Result<std::shared_ptr<Model>> m = find(name, version);
  if (m.ok()) return !shutting_down_;
  if (m.status().code() == StatusCode::kUnavailable) return false;
  return m.status();
}

Result<ModelMetadata> Server::model_metadata(const std::string& name,
                                             const std::string& version) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, find(name, version));
  ModelMetadata md;
  md.name = name;
  {
    std::shared_lock lock(mutex_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [v, model] : it->second.versions) md.versions.push_back(std::to_string(v));
    }
  }
  md.platform = m->info().platform;
  md.inputs = m->info().inputs;
  md.outputs = m->info().outputs;
  return md;
}

Result<int64_t> Server::model_max_batch_size(const std::string& name,
                                             const std::string& version) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, find(name, version));
  return m->config().batching.max_batch_size;
}

Result<ModelConfig> Server::model_config(const std::string& name,
                                         const std::string& version) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, find(name, version));
  ModelConfig c = m->config();
  // The tensors the backend found, where the config declares none.
  if (c.inputs.empty()) c.inputs = m->info().inputs;
  if (c.outputs.empty()) c.outputs = m->info().outputs;
  return c;
}

Result<std::unique_ptr<Backend>> Server::make_backend_named(std::string_view name) const {
  auto added = options_.backends.find(std::string(name));
  if (added == options_.backends.end()) return make_backend(name);
  std::unique_ptr<Backend> backend = added->second();
  if (!backend) return internal_error(fmt::format("backend \"{}\": its factory made none", name));
  return backend;
}

Status Server::load_failed(const std::string& name, const Status& status) {
  std::unique_lock lock(mutex_);
  Entry& e = models_[name];
  e.failed = true;
  e.state = e.versions.empty() ? "UNAVAILABLE" : "READY";
  e.reason = std::string(status.message());
  errors_->record(ErrorKind::kLoad, name, "", status);
  return status;
}

Status Server::load_entry(const ModelConfig& config, const fs::path& model_dir, bool worker,
                          const std::string& worker_name, const Parameters& parameters) {
  const std::string& name = config.name;
  // One thread per instance: an unbounded count lets one request exhaust the process's threads.
  if (config.instances > options_.max_instances) {
    return load_failed(
        name, invalid_argument_error(fmt::format(
                  "model \"{}\": {} instances asked for, but the server allows at most {} per "
                  "model (kiln serve --max-instances)",
                  name, config.instances, options_.max_instances)));
  }
  std::vector<int64_t> versions;
  if (worker) {
    versions = {1};
  } else {
    versions = version_folders(model_dir);
    // A chain has no files of its own; its version folder may be left out (version 1).
    if (versions.empty() && config.backend == "chain") versions = {1};
    if (versions.empty()) {
      return load_failed(name, not_found_error(fmt::format(
                                   "model \"{}\": no version folder (such as {}/1/) was found",
                                   name, model_dir.string())));
    }
    if (config.version_policy == "latest") versions = {versions.back()};
  }
  {
    std::unique_lock lock(mutex_);
    Entry& e = models_[name];
    if (e.versions.empty()) e.state = "LOADING";
  }
  std::map<int64_t, std::shared_ptr<Model>> loaded;
  for (int64_t v : versions) {
    fs::path dir = worker ? model_dir : model_dir / std::to_string(v);
    Result<std::unique_ptr<Backend>> backend = make_backend_named(config.backend);
    if (!backend.ok()) return load_failed(name, backend.status());
    Result<std::shared_ptr<Model>> m = Model::load(config, std::move(backend).value(),
                                                   std::to_string(v), dir, this, root_, cache_dir_);
    if (!m.ok()) return load_failed(name, m.status());
    loaded[v] = std::move(m).value();
  }
  std::map<int64_t, std::shared_ptr<Model>> old;
  {
    std::unique_lock lock(mutex_);
    Entry& e = models_[name];
    old.swap(e.versions);
    e.versions = std::move(loaded);
    e.state = "READY";
    e.reason.clear();
    e.failed = false;
    e.worker = worker;
    e.worker_name = worker_name;
    e.worker_parameters = parameters;
  }
  for (auto& [v, m] : old) m->stop();  // the old versions finish what they queued
  return Status();
}

Status Server::load_model(const std::string& name, const Parameters& overrides) {
  std::lock_guard<std::mutex> serial(load_mutex_);
  if (shutting_down_) return unavailable_error("the server is shutting down");
  if (options_.repository.empty()) {
    return not_found_error(fmt::format(
        "model \"{}\": the server has no model repository; start it with --repository", name));
  }
  KILN_ASSIGN_OR_RETURN(fs::path dir, model_folder(name));
  {
    std::unique_lock lock(mutex_);
    models_[name].signature = repository_signature(name);
  }
  Result<ModelConfig> config = read_model_config(dir);
  if (!config.ok()) return load_failed(name, config.status());
  config->parameters.merge(overrides);
  return load_entry(*config, dir, false, "", {});
}

Status Server::unload_model(const std::string& name) {
  std::lock_guard<std::mutex> serial(load_mutex_);
  std::map<int64_t, std::shared_ptr<Model>> old;
  {
    std::unique_lock lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      return not_found_error(fmt::format("model \"{}\" does not exist", name));
    }
    old.swap(it->second.versions);
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
    it->second.failed = false;
    if (it->second.worker) models_.erase(it);
  }
  for (auto& [v, m] : old) m->stop();
  return Status();
}

Result<std::string> Server::load_worker(const std::string& worker, const Parameters& parameters) {
  KILN_ASSIGN_OR_RETURN(auto probe, make_backend_named(worker));
  (void)probe;
  std::string endpoint;
  {
    std::shared_lock lock(mutex_);
    for (int i = 0;; ++i) {
      std::string candidate = i == 0 ? worker : fmt::format("{}-{}", worker, i);
      auto it = models_.find(candidate);
      if (it == models_.end()) {
        endpoint = candidate;
        break;
      }
      // The same worker with the same parameters is shared, as amdinfer does by default.
      if (it->second.worker && it->second.worker_name == worker &&
          it->second.worker_parameters == parameters && !it->second.versions.empty()) {
        return candidate;
      }
    }
  }
  ModelConfig config;
  config.name = endpoint;
  config.backend = worker;
  config.parameters = parameters;
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> max_batch, parameters.get_int("max_batch_size"));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> instances, parameters.get_int("instances"));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> delay,
                        parameters.get_int("max_queue_delay_microseconds"));
  config.batching.max_batch_size = std::max<int64_t>(0, max_batch.value_or(0));
  config.batching.max_queue_delay_microseconds = std::max<int64_t>(0, delay.value_or(0));
  config.instances = std::max<int64_t>(1, instances.value_or(1));
  KILN_RETURN_IF_ERROR(validate_model_config(config, fmt::format("worker \"{}\"", worker)));
  // A worker's `model` file is relative to the repository, and confined to it like any model's.
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> model, parameters.get_string("model"));
  if (model && root_.empty()) {
    return failed_precondition_error(fmt::format(
        "worker \"{}\": the server has no model repository, and a worker's model file must be "
        "in one; start it with --repository and give `model` relative to it",
        worker));
  }
  const fs::path dir = root_;
  std::lock_guard<std::mutex> serial(load_mutex_);
  if (shutting_down_) return unavailable_error("the server is shutting down");
  Status s = load_entry(config, dir, true, worker, parameters);
  if (!s.ok()) {
    std::unique_lock lock(mutex_);
    auto it = models_.find(endpoint);
    if (it != models_.end() && it->second.versions.empty()) models_.erase(it);
    return s;
  }
  return endpoint;
}

Status Server::unload_worker(const std::string& endpoint) {
  {
    std::shared_lock lock(mutex_);
    auto it = models_.find(endpoint);
    if (it == models_.end() || !it->second.worker) {
      return not_found_error(fmt::format(
          "no worker endpoint \"{}\" is loaded; workerLoad returns the name", endpoint));
    }
  }
  return unload_model(endpoint);
}

std::vector<RepositoryEntry> Server::repository_index(bool ready_only) const {
  std::shared_lock lock(mutex_);
  std::vector<RepositoryEntry> out;
  for (const auto& [name, e] : models_) {
    if (e.versions.empty()) {
      if (!ready_only) out.push_back({name, "", e.state, e.reason});
      continue;
    }
    for (const auto& [v, m] : e.versions) out.push_back({name, std::to_string(v), "READY", ""});
  }
  return out;
}

Result<std::vector<ModelStatistics>> Server::statistics(const std::string& name,
                                                        const std::string& version) const {
  std::vector<ModelStatistics> out;
  if (!name.empty()) {
    if (!version.empty()) {
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, find(name, version));
      out.push_back(m->statistics());
      return out;
    }
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, find(name, ""));
    (void)m;
  }
  std::vector<std::shared_ptr<Model>> models;
  {
    std::shared_lock lock(mutex_);
    for (const auto& [n, e] : models_) {
      if (!name.empty() && n != name) continue;
      for (const auto& [v, m] : e.versions) models.push_back(m);
    }
  }
  for (const auto& m : models) out.push_back(m->statistics());
  return out;
}

std::vector<ModelState> Server::model_states() const {
  std::shared_lock lock(mutex_);
  std::vector<ModelState> out;
  for (const auto& [name, e] : models_) {
    ModelState s;
    s.name = name;
    s.state = e.versions.empty() ? e.state : "READY";
    s.failed = e.failed;
    s.reason = e.reason;
    for (const auto& [v, m] : e.versions) s.versions.push_back(std::to_string(v));
    if (!e.versions.empty()) {
      const Model& newest = *e.versions.rbegin()->second;
      s.backend = newest.config().backend;
      s.platform = newest.info().platform;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Server::infer_async(InferenceRequest request, InferCallback done) {
  const Clock::time_point arrived = Clock::now();
  // Every failure it answers is kept among the recent errors too.
  done = [errors = errors_, model = request.model, version = request.version,
          done = std::move(done)](Result<InferenceResponse> r) {
    if (!r.ok()) errors->record(ErrorKind::kRequest, model, version, r.status());
    done(std::move(r));
  };
  if (shutting_down_) {
    done(unavailable_error("the server is shutting down; no new requests are taken"));
    return;
  }
  Result<std::shared_ptr<Model>> m = find(request.model, request.version);
  if (!m.ok()) {
    done(m.status());
    return;
  }
  (*m)->infer(std::move(request), std::move(done), arrived);
}

void Server::route(InferenceRequest request, InferCallback done) {
  const Clock::time_point arrived = Clock::now();
  Result<std::shared_ptr<Model>> m = find(request.model, request.version);
  if (!m.ok()) {
    done(m.status());
    return;
  }
  (*m)->infer(std::move(request), std::move(done), arrived);
}

std::future<Result<InferenceResponse>> Server::infer(InferenceRequest request) {
  auto promise = std::make_shared<std::promise<Result<InferenceResponse>>>();
  std::future<Result<InferenceResponse>> future = promise->get_future();
  infer_async(std::move(request),
              [promise](Result<InferenceResponse> r) { promise->set_value(std::move(r)); });
  return future;
}

void Server::shutdown() {
  if (shutting_down_.exchange(true)) return;
  { std::lock_guard<std::mutex> lock(poll_mutex_); }
  poll_cv_.notify_all();
  if (poll_thread_.joinable()) poll_thread_.join();
  std::lock_guard<std::mutex> serial(load_mutex_);
  std::vector<std::shared_ptr<Model>> models;
  {
    std::shared_lock lock(mutex_);
    for (const auto& [n, e] : models_) {
      for (const auto& [v, m] : e.versions) models.push_back(m);
    }
  }
  // Chains first: what they queued still runs through their steps' models.
  std::stable_partition(models.begin(), models.end(),
                        [](const auto& m) { return m->config().backend == "chain"; });
  for (const auto& m : models) m->stop();
}

}  // namespace kiln::server
