// SPDX-License-Identifier: Apache-2.0
// Request checks against a model's tensors, and the batch run that fans results back out.
#include "server/core/model.h"

#include <fmt/format.h>

#include <exception>
#include <set>

#include "core/logging.h"

namespace kiln::server {

namespace {

uint64_t nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

std::string names_of(const std::vector<TensorMetadata>& tensors) {
  std::string out;
  for (const TensorMetadata& t : tensors) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

FailureReason reason_of(const Status& status) {
  switch (status.code()) {
    case StatusCode::kResourceExhausted: return FailureReason::kRejected;
    case StatusCode::kDeadlineExceeded: return FailureReason::kTimeout;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound: return FailureReason::kInvalid;
    case StatusCode::kUnavailable: return FailureReason::kUnavailable;
    default: return FailureReason::kBackend;
  }
}

// The message of the exception being handled (call inside a catch block).
std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// A backend's load, with an exception it throws turned into an internal error: the load runs on a
// transport's thread, which must not unwind.
Result<BackendInfo> load_backend(Backend& backend, const BackendContext& context) {
  try {
    return backend.load(context);
  } catch (...) {
    return internal_error(fmt::format("the {} backend threw while loading: {}",
                                      context.config.backend, current_exception_message()));
  }
}

}  // namespace

Result<std::shared_ptr<Model>> Model::load(const ModelConfig& config,
                                           std::unique_ptr<Backend> backend, std::string version,
                                           const std::filesystem::path& version_dir,
                                           ModelRouter* router, const std::filesystem::path& root,
                                           const std::filesystem::path& cache_dir) {
  std::shared_ptr<Model> m(new Model());
  m->config_ = config;
  m->version_ = std::move(version);
  m->backend_ = std::move(backend);
  BackendContext context{config, m->version_, version_dir, router, root, cache_dir};
  Result<BackendInfo> info = load_backend(*m->backend_, context);
  if (!info.ok()) {
    return info.status().with_context(
        fmt::format("loading model \"{}\" version {}", config.name, m->version_));
  }
  m->info_ = std::move(info).value();
  // The backend's batch limit wins over a larger configured one (amdinfer: the compiled batch).
  BatchingConfig batching = config.batching;
  if (m->info_.max_batch_size > 0) {
    if (batching.max_batch_size == 0 || batching.max_batch_size > m->info_.max_batch_size) {
      batching.max_batch_size = m->info_.max_batch_size;
    }
  }
  for (int64_t p : batching.preferred_batch_size) {
    if (p > batching.max_batch_size) {
      return invalid_argument_error(
          fmt::format("model \"{}\": preferred_batch_size {} exceeds the batch the backend runs "
                      "({})",
                      config.name, p, batching.max_batch_size));
    }
  }
  m->config_.batching = batching;
  m->stats_ = std::make_unique<StatsRecorder>(config.name, m->version_);
  Model* raw = m.get();
  m->scheduler_ = std::make_unique<Scheduler>(
      config.name, batching, instance_threads(config),
      [raw](std::vector<PendingRequest>& batch) { raw->run_batch(batch); },
      [raw](PendingRequest& r) { raw->expire(r); });
  KILN_RETURN_IF_ERROR(m->scheduler_->start_status());
  return m;
}

Model::~Model() {
  if (scheduler_) scheduler_->stop();
}

Result<int64_t> Model::check_request(const InferenceRequest& r) const {
  const std::string& model = config_.name;
  if (r.inputs.empty()) {
    return invalid_argument_error(fmt::format("model \"{}\": the request has no inputs", model));
  }
  std::set<std::string_view> seen;
  const bool dim_batching = info_.max_batch_size > 0;
  int64_t batch = -1;
  for (const InferTensor& in : r.inputs) {
    if (!seen.insert(in.name).second) {
      return invalid_argument_error(
          fmt::format("model \"{}\": input \"{}\" is given twice", model, in.name));
    }
    if (info_.inputs.empty()) continue;
    const TensorMetadata* meta = nullptr;
    for (const TensorMetadata& t : info_.inputs) {
      if (t.name == in.name) meta = &t;
    }
    if (meta == nullptr) {
      return invalid_argument_error(
          fmt::format("model \"{}\" has no input \"{}\"; its inputs are: {}", model, in.name,
                      names_of(info_.inputs)));
    }
    if (meta->dtype != in.data.dtype()) {
      return invalid_argument_error(fmt::format("model \"{}\": input \"{}\": expected {}, got {}",
                                                model, in.name, wire_dtype_name(meta->dtype),
                                                wire_dtype_name(in.data.dtype())));
    }
    const std::vector<int64_t>& dims = in.data.shape().dims();
    bool fits = dims.size() == meta->shape.size();
    for (size_t i = 0; fits && i < dims.size(); ++i) {
      fits = meta->shape[i] < 0 || meta->shape[i] == dims[i];
    }
    if (!fits) {
      return invalid_argument_error(
          fmt::format("model \"{}\": input \"{}\": expected shape {}, got {}", model, in.name,
                      dims_to_string(meta->shape), dims_to_string(dims)));
    }
    if (dim_batching) {
      if (batch >= 0 && dims[0] != batch) {
        return invalid_argument_error(fmt::format(
            "model \"{}\": inputs disagree on the batch size (dim 0): {} and {} (\"{}\")", model,
            batch, dims[0], in.name));
      }
      batch = dims[0];
    }
  }
  for (const TensorMetadata& t : info_.inputs) {
    if (!seen.count(t.name)) {
      return invalid_argument_error(
          fmt::format("model \"{}\": input \"{}\" is missing; the "
                      "model's inputs are: {}",
                      model, t.name, names_of(info_.inputs)));
    }
  }
  if (dim_batching) {
    if (batch < 1 || batch > config_.batching.max_batch_size) {
      return invalid_argument_error(
          fmt::format("model \"{}\": batch size (dim 0) {} is outside 1..{} (max_batch_size)",
                      model, batch, config_.batching.max_batch_size));
    }
  } else {
    batch = 1;
  }
  // Requested outputs must exist; the echo backend's outputs are its inputs.
  std::set<std::string_view> out_seen;
  for (const RequestedOutput& o : r.outputs) {
    bool known = false;
    if (info_.outputs.empty()) {
      known = seen.count(o.name) > 0;
    } else {
      for (const TensorMetadata& t : info_.outputs) known = known || t.name == o.name;
    }
    if (!known) {
      return invalid_argument_error(
          fmt::format("model \"{}\" has no output \"{}\"; its outputs are: {}", model, o.name,
                      info_.outputs.empty() ? "its inputs' names" : names_of(info_.outputs)));
    }
    if (!out_seen.insert(o.name).second) {
      return invalid_argument_error(
          fmt::format("model \"{}\": output \"{}\" is requested twice", model, o.name));
    }
  }
  return batch;
}

void Model::infer(InferenceRequest&& request, InferCallback done, Clock::time_point arrived) {
  auto fail = [&](const Status& status) {
    stats_->record_failure(reason_of(status), nanos(Clock::now() - arrived));
    done(status);
  };
  Result<int64_t> batch = check_request(request);
  if (!batch.ok()) return fail(batch.status());
  Result<std::optional<int64_t>> priority = request.parameters.get_int("priority");
  if (!priority.ok()) return fail(priority.status());
  Result<std::optional<int64_t>> timeout = request.parameters.get_int("timeout");
  if (!timeout.ok()) return fail(timeout.status());
  if (priority->value_or(0) < 0 || timeout->value_or(0) < 0) {
    return fail(invalid_argument_error(
        "parameters \"priority\" and \"timeout\" (microseconds) must not be negative"));
  }
  PendingRequest p;
  p.batch_size = *batch;
  p.priority = static_cast<uint32_t>(std::min<int64_t>(priority->value_or(0), UINT32_MAX));
  p.arrived = arrived;
  int64_t timeout_us = timeout->value_or(config_.batching.default_timeout_microseconds);
  if (timeout_us > 0) p.deadline = arrived + std::chrono::microseconds(timeout_us);
  // A deadline the request brings (a chain's step) counts too; a chain passes it on.
  p.deadline = std::min(p.deadline, request.deadline);
  request.deadline = p.deadline;
  p.request = std::move(request);
  p.done = std::move(done);
  Status queued = scheduler_->enqueue(std::move(p));
  // enqueue() leaves the request untouched when it fails.
  if (!queued.ok()) {
    stats_->record_failure(reason_of(queued), nanos(Clock::now() - arrived));
    p.done(queued);
  }
}

void Model::expire(PendingRequest& r) {
  Clock::time_point now = Clock::now();
  stats_->record_failure(FailureReason::kTimeout, nanos(now - r.arrived));
  r.done(deadline_exceeded_error(
      fmt::format("model \"{}\": request \"{}\" waited {} us in the queue, past its timeout",
                  config_.name, r.request.id,
                  std::chrono::duration_cast<std::chrono::microseconds>(now - r.arrived).count())));
}

void Model::run_batch(std::vector<PendingRequest>& batch) {
  std::vector<const InferenceRequest*> requests;
  requests.reserve(batch.size());
  int64_t units = 0;
  for (const PendingRequest& p : batch) {
    requests.push_back(&p.request);
    units += p.batch_size;
  }
  const Clock::time_point start = Clock::now();
  std::vector<Result<std::vector<InferTensor>>> results;
  Status failed;
  // A backend that throws or miscounts fails this batch's requests, not the instance thread (an
  // exception escaping it would end the process) or the model's other requests.
  try {
    results = backend_->execute(requests);
    if (results.size() != batch.size()) {
      failed =
          internal_error(fmt::format("the {} backend returned {} results for a batch of {} "
                                     "requests",
                                     config_.backend, results.size(), batch.size()));
    }
  } catch (...) {
    failed =
        internal_error(fmt::format("the {} backend threw while running a batch of {} "
                                   "request(s): {}",
                                   config_.backend, batch.size(), current_exception_message()));
  }
  const Clock::time_point end = Clock::now();
  if (!failed.ok()) {
    int64_t held = 0;
    if (backend_log_.allow(&held)) {
      log(LogLevel::kError, "model \"{}\" version {}: {}{}", config_.name, version_,
          failed.message(), held ? fmt::format(" ({} more batches failed so)", held) : "");
    }
    results.assign(batch.size(), failed);
  }
  stats_->record_batch(units, nanos(end - start));
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingRequest& p = batch[i];
    if (RequestTimeline* t = p.request.timeline) {  // a traced request
      t->queued = p.arrived;
      t->compute_start = start;
      t->compute_end = end;
      t->batch_requests = static_cast<int64_t>(batch.size());
      t->batch_size = units;
      t->version = version_;
    }
    if (!results[i].ok()) {
      stats_->record_failure(reason_of(results[i].status()), nanos(end - p.arrived));
      p.done(results[i].status().with_context(fmt::format("model \"{}\"", config_.name)));
      continue;
    }
    if (end > p.deadline) {  // the timeout covers the run too; a late answer is an error
      stats_->record_failure(FailureReason::kTimeout, nanos(end - p.arrived));
      p.done(deadline_exceeded_error(fmt::format(
          "model \"{}\": request \"{}\" finished {} us after its timeout (it waited {} us in the "
          "queue and ran {} us)",
          config_.name, p.request.id,
          std::chrono::duration_cast<std::chrono::microseconds>(end - p.deadline).count(),
          std::chrono::duration_cast<std::chrono::microseconds>(start - p.arrived).count(),
          std::chrono::duration_cast<std::chrono::microseconds>(end - start).count())));
      continue;
    }
    InferenceResponse response;
    response.model = config_.name;
    response.version = version_;
    response.id = std::move(p.request.id);
    std::vector<InferTensor>& outputs = *results[i];
    if (p.request.outputs.empty()) {
      response.outputs = std::move(outputs);
    } else {
      for (const RequestedOutput& o : p.request.outputs) {
        for (InferTensor& t : outputs) {
          if (t.name == o.name) response.outputs.push_back(std::move(t));
        }
      }
    }
    stats_->record_success(nanos(start - p.arrived), nanos(Clock::now() - p.arrived));
    p.done(std::move(response));
  }
}

ModelStatistics Model::statistics() const {
  ModelStatistics s = stats_->snapshot();
  s.pending = scheduler_->pending();
  return s;
}

}  // namespace kiln::server
