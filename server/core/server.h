// SPDX-License-Identifier: Apache-2.0
// Server: the in-process API every transport calls — health, metadata, the model repository,
// load/unload, inference and statistics. Knows nothing of HTTP or gRPC.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/core/access.h"
#include "server/core/model.h"
#include "server/core/recent_errors.h"
#include "server/core/trace.h"
#include "server/core/types.h"

namespace kiln::server {

// Who may load and unload models over the network (Triton's --model-control-mode): kNone refuses
// the repository and worker load/unload endpoints; kExplicit allows them. In-process callers of
// Server (the operator's own code) are not restricted.
enum class ModelControl { kNone, kExplicit };

struct ServerOptions {
  // `<repository>/<model>/config.toml` and `<repository>/<model>/<version>/...`; may be empty
  // when models come only from workerLoad.
  std::filesystem::path repository;
  // Load every model of the repository at start; otherwise only `load_models` (and, for a chain
  // among them, the models its steps call).
  bool load_all = true;
  std::vector<std::string> load_models;
  // When positive, a thread rescans the repository this often: a new model folder is loaded, a
  // changed config or version folder list reloads the model, a removed folder unloads it.
  std::chrono::milliseconds poll_interval{0};
  // The most instance threads one model version may ask for (config `instances`, the
  // instance_group counts, or a worker's `instances` parameter); more is refused at load.
  int64_t max_instances = 64;
  // See ModelControl; the transports ask model_control_status() before a load or unload.
  ModelControl model_control = ModelControl::kNone;
  // Where compiled models are cached: empty means KILN_CACHE_DIR/artifacts, else
  // $XDG_CACHE_HOME/kiln/artifacts, else ~/.cache/kiln/artifacts. Never inside the repository
  // (KServe mounts it read-only); a cache dir there turns caching off.
  std::filesystem::path cache_dir;
  // Endpoint groups that need a header / metadata value (kiln serve --restricted-api); the
  // transports check it, the in-process API does not.
  AccessPolicy access;
  // Backends the embedding program adds, by the name a config gives (`backend = "..."`) or a
  // worker load asks for; kiln's own backend names cannot be taken.
  std::map<std::string, BackendFactory> backends;
  // Which inference requests the transports trace and where the spans go (kiln serve --trace-*);
  // null: a tracer that is off and exports nothing (its settings can still be read).
  std::shared_ptr<Tracer> tracer;
};

// One row of the repository index.
struct RepositoryEntry {
  std::string name;
  std::string version;  // empty when no version is loaded
  std::string state;    // "READY", "LOADING", "UNAVAILABLE"
  std::string reason;   // why it is unavailable
};

// One model as the status page shows it.
struct ModelState {
  std::string name;
  std::vector<std::string> versions;  // the loaded ones, ascending; empty when none is
  std::string state;                  // "READY", "LOADING", "UNAVAILABLE"
  bool failed = false;  // the last load failed; a READY model still serves its older version
  std::string reason;   // why it failed or is unavailable ("unloaded")
  std::string backend;  // of the newest loaded version; empty when none is loaded
  std::string platform;
};

class Server final : public ModelRouter {
 public:
  // Scans the repository and loads its models. A model that fails to load is reported by the
  // repository index (and makes ready() false); a missing repository folder is an error.
  static Result<std::unique_ptr<Server>> create(ServerOptions options);
  // Drains (see shutdown()).
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  bool live() const { return true; }
  // True when not shutting down and every model the server was asked to load is ready.
  bool ready() const;
  ServerMetadata metadata() const;

  // Not found for an unknown model or version; false while loading or after a failed load.
  Result<bool> model_ready(const std::string& name, const std::string& version = "") const;
  Result<ModelMetadata> model_metadata(const std::string& name,
                                       const std::string& version = "") const override;
  Result<int64_t> model_max_batch_size(const std::string& name,
                                       const std::string& version = "") const override;
  // The configuration the version runs with (batch limits as the backend settled them).
  Result<ModelConfig> model_config(const std::string& name, const std::string& version = "") const;

  // (Re)loads a repository model; `overrides` replace its config's [parameters]. Loads and
  // unloads run one at a time; requests keep flowing to the old version until the new one is
  // ready.
  Status load_model(const std::string& name, const Parameters& overrides = {});
  // Drains and unloads every version of the model.
  Status unload_model(const std::string& name);
  // amdinfer's workerLoad: loads backend `worker` ("echo", "migraphx", "compiler") with the given
  // parameters (`model` = the file, `batch`, `max_batch_size`, `instances`, ...) and returns the
  // endpoint name to send requests to.
  Result<std::string> load_worker(const std::string& worker, const Parameters& parameters);
  Status unload_worker(const std::string& endpoint);

  // OK when the network may load and unload models; otherwise permission denied naming the
  // request and the flag that allows it.
  Status model_control_status(std::string_view what) const;
  const AccessPolicy& access() const { return options_.access; }
  Tracer& tracer() const { return *options_.tracer; }

  std::vector<RepositoryEntry> repository_index(bool ready_only = false) const;
  // Statistics of every loaded version (name empty), of one model, or of one version.
  Result<std::vector<ModelStatistics>> statistics(const std::string& name = "",
                                                  const std::string& version = "") const;

  // Every model the server knows, loaded or not, by name.
  std::vector<ModelState> model_states() const;
  // The latest failed requests and loads (RecentErrors), oldest first, and how many there were.
  std::vector<RecentError> recent_errors() const { return errors_->snapshot(); }
  uint64_t error_count() const { return errors_->total(); }
  // Records a request a transport refused before it reached infer_async (e.g. a body that does
  // not decode); infer_async records the failures it answers itself.
  void record_request_error(const std::string& model, const std::string& version,
                            const Status& status) {
    errors_->record(ErrorKind::kRequest, model, version, status);
  }

  // Runs a request; `done` is called exactly once, possibly on this thread (for a request that
  // fails its checks) or on a model instance thread.
  void infer_async(InferenceRequest request, InferCallback done);
  std::future<Result<InferenceResponse>> infer(InferenceRequest request);
  // infer_async for a chain's steps: also while draining, so chains finish what they took.
  void route(InferenceRequest request, InferCallback done) override;

  // One rescan of the repository (what the polling thread does): loads new models, reloads
  // changed ones and unloads removed ones. Models that were never asked for (load_all false) are
  // loaded only when their files change.
  void poll_repository();

  // Stops taking requests (ready() turns false, new requests get unavailable), runs every queued
  // request to completion and stops the instance threads. Idempotent.
  void shutdown();

 private:
  struct Entry {
    std::map<int64_t, std::shared_ptr<Model>> versions;  // by version number
    std::string state = "UNAVAILABLE";
    std::string reason;
    bool failed = false;  // a load was asked for and failed
    bool worker = false;  // loaded by workerLoad, not from the repository
    std::string worker_name;
    Parameters worker_parameters;
    // What the repository held at the last load attempt: the config text and the version folders.
    std::string signature;
  };

  explicit Server(ServerOptions options) : options_(std::move(options)) {}
  // The repository folder of model `name`, checked to stay inside the repository once symlinks
  // are resolved.
  Result<std::filesystem::path> model_folder(const std::string& name) const;
  Result<std::shared_ptr<Model>> find(const std::string& name, const std::string& version) const;
  // A fresh backend called `name`: one of ServerOptions::backends, else kiln's (make_backend).
  Result<std::unique_ptr<Backend>> make_backend_named(std::string_view name) const;
  // Loads `config`'s versions from `model_dir` and swaps them in; the old versions drain.
  Status load_entry(const ModelConfig& config, const std::filesystem::path& model_dir, bool worker,
                    const std::string& worker_name, const Parameters& parameters);
  Status load_failed(const std::string& name, const Status& status);
  std::vector<std::string> model_names() const;  // callers hold mutex_
  std::string repository_signature(const std::string& name) const;
  void poll_loop();

  const ServerOptions options_;
  std::filesystem::path root_;       // the repository, symlinks resolved; empty without one
  std::filesystem::path cache_dir_;  // empty: no compile cache
  mutable std::shared_mutex mutex_;
  std::map<std::string, Entry> models_;
  std::mutex load_mutex_;  // one load or unload at a time
  std::atomic<bool> shutting_down_{false};
  std::mutex poll_mutex_;
  std::condition_variable poll_cv_;
  std::thread poll_thread_;
  // Shared with the completion callbacks infer_async wraps.
  std::shared_ptr<RecentErrors> errors_ = std::make_shared<RecentErrors>();
};

}  // namespace kiln::server
