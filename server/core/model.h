// SPDX-License-Identifier: Apache-2.0
// Model: one loaded version of a model — its backend, request checks, scheduler and statistics.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "server/backends/backend.h"
#include "server/core/log_limiter.h"
#include "server/core/model_config.h"
#include "server/core/scheduler.h"
#include "server/core/statistics.h"

namespace kiln::server {

class Model {
 public:
  // Loads the version's files into `backend` (made for config.backend) and starts the instance
  // threads. `router` lets a chain call the server's other models (may be null); `root` and
  // `cache_dir` are the BackendContext's (the repository files must stay in, and the compile
  // cache). A backend whose load throws gives an internal error naming the model.
  static Result<std::shared_ptr<Model>> load(const ModelConfig& config,
                                             std::unique_ptr<Backend> backend, std::string version,
                                             const std::filesystem::path& version_dir,
                                             ModelRouter* router = nullptr,
                                             const std::filesystem::path& root = {},
                                             const std::filesystem::path& cache_dir = {});
  // Drains queued requests.
  ~Model();

  const std::string& name() const { return config_.name; }
  const std::string& version() const { return version_; }
  const ModelConfig& config() const { return config_; }
  const BackendInfo& info() const { return info_; }

  // Checks the request against the model's tensors and queues it. `done` is called exactly once:
  // with the response, or with the error (invalid argument for a wrong name, dtype, shape or
  // batch; resource exhausted when the queue is full; deadline exceeded when its timeout passed
  // in the queue or while it ran; unavailable while unloading).
  void infer(InferenceRequest&& request, InferCallback done, Clock::time_point arrived);

  // The batch size the request adds (dim 0 of its inputs for a batching model, else 1), or why
  // the request does not fit the model.
  Result<int64_t> check_request(const InferenceRequest& request) const;

  // Stops taking requests and runs every queued one.
  void stop() { scheduler_->stop(); }

  ModelStatistics statistics() const;

 private:
  Model() = default;
  void run_batch(std::vector<PendingRequest>& batch);
  void expire(PendingRequest& request);

  ModelConfig config_;
  std::string version_;
  BackendInfo info_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<StatsRecorder> stats_;
  std::unique_ptr<Scheduler> scheduler_;
  LogLimiter backend_log_;  // a backend that throws, logged once in a while
};

}  // namespace kiln::server
