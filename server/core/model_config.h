// SPDX-License-Identifier: Apache-2.0
// ModelConfig: a model's `config.toml` (amdinfer style, with Triton's batching keys), parsed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/core/types.h"

namespace kiln::server {

// How the dynamic batcher of one model forms batches (Triton's dynamic_batching semantics).
struct BatchingConfig {
  // The most requests' batch entries one execution takes; 0 means the model does not batch and
  // every request runs alone.
  int64_t max_batch_size = 0;
  // Sizes worth waiting for; the largest one that the queue can fill is sent at once.
  std::vector<int64_t> preferred_batch_size;
  // How long the oldest request may wait for a fuller batch; 0 sends what is queued at once.
  int64_t max_queue_delay_microseconds = 0;
  // Requests waiting beyond this are rejected (resource exhausted); 0 means no limit.
  int64_t max_queue_size = 0;
  // A request's queue timeout when it does not give "timeout"; 0 means none.
  int64_t default_timeout_microseconds = 0;
};

// One step of a chain (Triton's ensemble step): a model of the server and how its tensors map to
// the chain's.
struct ChainStep {
  std::string model;
  std::string version;  // empty: the newest ready version
  // (the model's input, the chain tensor that feeds it), in the config's order.
  std::vector<std::pair<std::string, std::string>> input_map;
  // (the model's output, the chain tensor it becomes).
  std::vector<std::pair<std::string, std::string>> output_map;
};

struct ModelConfig {
  std::string name;
  // The backend that runs the model ("echo", "compiler", "migraphx", "pipeline", "rocal",
  // "chain"); derived from `platform` ("onnx_onnxv1", "migraphx_mxr", "kiln": compiler;
  // "rocal_json", "kiln_pipeline": pipeline; "ensemble": chain) when not given.
  std::string backend;
  std::string platform;
  // Worker threads, each running whole batches: `instances` per GPU when `gpus` lists some
  // (Triton's instance_group count), else `instances` in all (instance_threads()).
  int64_t instances = 1;
  // The GPUs the instances run on (Triton's instance_group gpus; the compiler backend's cuda
  // target puts one executable on each and sends each batch to the least busy). Empty: the
  // target's first device.
  std::vector<int64_t> gpus;
  // "latest" loads the highest numbered version folder, "all" every one.
  std::string version_policy = "latest";
  BatchingConfig batching;
  // Load-time parameters for the backend (`model`, `batch`, `pad_batch`, `target`, ...).
  Parameters parameters;
  // Declared tensors; backends that know their model's tensors check them against these.
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
  // The chain backend's steps, run in order ([[steps]]).
  std::vector<ChainStep> steps;
};

// How many worker threads run the model's batches: instances per listed GPU, or instances.
int64_t instance_threads(const ModelConfig& config);

// Parses config.toml text; `source` names the file in messages. Unknown keys are errors, so a typo
// never silently falls back to a default.
Result<ModelConfig> parse_model_config(std::string_view text, std::string_view source);

// Parses Triton's config.pbtxt text for the fields kiln supports (name, platform, backend,
// version_policy, max_batch_size, input, output, instance_group, default_model_filename,
// dynamic_batching, parameters); other fields are errors. Triton's dims leave out the batch dim,
// so a batching model's tensors get -1 in front. Backend "onnxruntime" is served by "compiler".
Result<ModelConfig> parse_model_config_pbtxt(std::string_view text, std::string_view source);

// Reads `<model_dir>/config.toml`, or `<model_dir>/config.pbtxt` when there is no config.toml; the
// model's name defaults to the folder's name and must match it when given.
Result<ModelConfig> read_model_config(const std::filesystem::path& model_dir);

// Checks the values together (sizes positive, preferred sizes within max_batch_size, a known
// backend name) and fills `backend` from `platform`.
Status validate_model_config(ModelConfig& config, std::string_view source);

}  // namespace kiln::server
