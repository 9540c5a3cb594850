// SPDX-License-Identifier: Apache-2.0
// Backend: what runs a model's batches (echo, compiler, pipeline, chain).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/core/model_config.h"
#include "server/core/types.h"

namespace kiln::server {

// What a backend found out while loading: its real tensors and how it batches.
struct BackendInfo {
  std::string platform;
  // Inputs and outputs with real names, dtypes and shapes; -1 for variable dims. A batching
  // backend's tensors start with the batch dim (-1). An empty `inputs` list accepts any inputs
  // (the echo backend).
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
  // The largest batch one execute() takes along dim 0; 0 when requests are not batched along a
  // dim (each request still counts one in a batch of requests).
  int64_t max_batch_size = 0;
};

// What a chain backend sees of the server it runs in: other models' metadata, and a way to run
// requests on them (each through that model's own checks, queue and batcher).
class ModelRouter {
 public:
  virtual ~ModelRouter() = default;
  virtual Result<ModelMetadata> model_metadata(const std::string& name,
                                               const std::string& version) const = 0;
  // The batch limit the model runs with (0: it does not batch along dim 0).
  virtual Result<int64_t> model_max_batch_size(const std::string& name,
                                               const std::string& version) const = 0;
  // Like Server::infer_async, but also while the server drains, so requests a chain took before a
  // shutdown finish.
  virtual void route(InferenceRequest request, InferCallback done) = 0;
};

// Where a model version's files are and how it was configured.
struct BackendContext {
  ModelConfig config;
  std::string version;
  std::filesystem::path version_dir;
  // The server, for backends that call other models (chain); null outside a server.
  ModelRouter* router = nullptr;
  // The model repository, symlinks resolved: every file a backend reads must resolve inside it
  // (find_model_file checks). Empty: no confinement (a backend used outside a server).
  std::filesystem::path root;
  // Where compiled forms of the model may be cached; empty: no cache.
  std::filesystem::path cache_dir;
};

// A loaded model version. execute() is called from the model's instance threads, several at once
// when instances > 1, so it must be thread-safe. Failures are meant to be returned, but a backend
// that throws (code it calls may) costs only its own requests or load: the server turns the
// exception into an internal error naming the model.
class Backend {
 public:
  virtual ~Backend() = default;

  // Loads the model; errors name the model and the file.
  virtual Result<BackendInfo> load(const BackendContext& context) = 0;

  // Runs a batch of requests that passed the model's checks against BackendInfo (names, dtypes,
  // shapes, batch sizes). Returns one result per request, in order; a failed request does not
  // fail the others.
  virtual std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) = 0;
};

// The file a backend serves: the `model` parameter (relative to the version folder), or the one
// file with `extension` (".onnx", ".json") in the version folder. Not found names the folder.
// With a root, the `model` parameter must be a relative path without "..", and the file must
// resolve (symlinks followed) inside the root; otherwise invalid argument or permission denied,
// decided before the file system is looked at, so answers do not probe paths outside.
Result<std::filesystem::path> find_model_file(const BackendContext& context,
                                              std::string_view extension);

// A file or folder a backend parameter names (`parameter` = `given`), relative to the version
// folder. With a root, the same rules as find_model_file's `model`: relative, without "..", and
// resolving inside the root. Not found names the parameter and the path.
Result<std::filesystem::path> repository_path(const BackendContext& context,
                                              std::string_view parameter, const std::string& given);

// Makes a fresh backend (one per loaded model version).
using BackendFactory = std::function<std::unique_ptr<Backend>()>;

// The backend called `name` ("echo", "compiler" or its alias "migraphx", "pipeline" or its alias
// "rocal", "chain"), or a not-found error
// that lists them.
Result<std::unique_ptr<Backend>> make_backend(std::string_view name);
std::vector<std::string> backend_names();

// Whether `path` (symlinks resolved) is `root` or inside it; `root` must be canonical.
bool inside_root(const std::filesystem::path& root, const std::filesystem::path& path);

// The default compile cache (compiler::default_compile_cache_dir()): $KILN_CACHE_DIR/artifacts,
// else $XDG_CACHE_HOME/kiln/artifacts, else ~/.cache/kiln/artifacts.
std::filesystem::path default_cache_dir();

}  // namespace kiln::server
