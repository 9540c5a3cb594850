// SPDX-License-Identifier: Apache-2.0
// The compile-or-load service: keys, the in-memory entries, cache files and compiling on a miss.
#include "compiler/cache/compile_cache.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cctype>
#include <set>
#include <string_view>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/checksum.h"
#include "compiler/artifact/fingerprint.h"
#include "core/cache_dir.h"
#include "core/env.h"
#include "core/logging.h"
#include "core/mapped_file.h"

namespace kiln::compiler {

namespace {

namespace fs = std::filesystem;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The external data files (their "location" entries) of every tensor in `graph`, at any depth.
void external_locations(const onnx::GraphProto& graph, std::set<std::string>& out);

void external_locations(const onnx::TensorProto& t, std::set<std::string>& out) {
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") out.insert(kv.value());
  }
}

void external_locations(const onnx::GraphProto& graph, std::set<std::string>& out) {
  for (const auto& t : graph.initializer()) external_locations(t, out);
  for (const auto& node : graph.node()) {
    for (const auto& a : node.attribute()) {
      if (a.has_t()) external_locations(a.t(), out);
      for (const auto& t : a.tensors()) external_locations(t, out);
      if (a.has_g()) external_locations(a.g(), out);
      for (const auto& g : a.graphs()) external_locations(g, out);
    }
  }
}

// file_hash combined with the contents of the external data files `bytes` names (found in
// `dir`). Only a model whose bytes mention "location" is parsed: most models have no external
// data and are not decoded twice.
Result<uint64_t> model_hash(std::span<const uint8_t> bytes, uint64_t file_hash,
                            const std::string& dir, const std::string& label) {
  constexpr std::string_view kLocation = "location";
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.find(kLocation) == std::string_view::npos) return file_hash;
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid_argument_error(fmt::format("{}: not an ONNX model (cannot parse it)", label));
  }
  std::set<std::string> locations;
  external_locations(proto.graph(), locations);
  Xxhash64 h(file_hash);
  for (const std::string& location : locations) {
    h.update(as_bytes(location));
    const std::string path = (fs::path(dir) / location).string();
    Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
    if (!file.ok()) {
      // Importing reports it, naming the tensor; the key only needs to differ from a present one.
      h.update(as_bytes("\nmissing\n"));
      continue;
    }
    h.update((*file)->bytes());
    release_file_pages((*file)->bytes());
  }
  return h.digest();
}

// `name` with every character but letters, digits, '.', '-' and '_' replaced by '-', at most 48
// characters.
std::string file_safe(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 48)) {
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '-';
  }
  return out.empty() ? "model" : out;
}

// The request as the lines the key hashes and the artifact records.
std::vector<std::pair<std::string, std::string>> request_options(const CompileRequest& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, dims] : r.import.input_shapes) {
    out.emplace_back("input-shape", fmt::format("{}={}", name, fmt::join(dims, ",")));
  }
  if (r.import.default_dim_value >= 0) {
    out.emplace_back("batch", std::to_string(r.import.default_dim_value));
  }
  if (r.options.seed != 0) out.emplace_back("seed", std::to_string(r.options.seed));
  if (!r.options.optimize) out.emplace_back("no-optimize", "");
  for (const auto& flag : r.rewrite_flags) out.push_back(flag);
  return out;
}

std::string describe(const ModelSource& m) {
  return m.label.empty() ? "model" : m.label;
}

}  // namespace

Result<ModelSource> ModelSource::from_file(const std::string& path, std::string label) {
  ModelSource m;
  m.path = path;
  m.label = label.empty() ? fs::path(path).filename().string() : std::move(label);
  m.external_data_dir = fs::path(path).parent_path().string();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  const std::span<const uint8_t> bytes = file->bytes();
  m.size = bytes.size();
  m.file_hash = xxhash64(bytes);
  KILN_ASSIGN_OR_RETURN(m.hash, model_hash(bytes, m.file_hash, m.external_data_dir, m.label));
  release_file_pages(bytes);
  return m;
}

Result<ModelSource> ModelSource::from_bytes(std::shared_ptr<const std::string> bytes,
                                            std::string label, std::string external_data_dir) {
  ModelSource m;
  m.label = std::move(label);
  m.external_data_dir = std::move(external_data_dir);
  m.size = bytes->size();
  m.file_hash = xxhash64(as_bytes(*bytes));
  KILN_ASSIGN_OR_RETURN(m.hash,
                        model_hash(as_bytes(*bytes), m.file_hash, m.external_data_dir, m.label));
  m.bytes = std::move(bytes);
  return m;
}

std::filesystem::path default_compile_cache_dir() {
  return cache_root() / "artifacts";
}

CompileCache::CompileCache(std::filesystem::path dir, bool use_disk)
    : dir_(dir.empty() ? default_compile_cache_dir() : std::move(dir)), use_disk_(use_disk) {}

uint64_t CompileCache::key(const ModelSource& model, const CompileRequest& request) const {
  std::string text = fmt::format("kiln compile cache 1\n{}model {:016x} {}\n",
                                 fingerprint_text(request.target), model.hash, model.size);
  for (const auto& [k, v] : request_options(request)) text += fmt::format("--{} {}\n", k, v);
  if (request.data_hash != 0) text += fmt::format("data {:016x}\n", request.data_hash);
  for (const EnvFlagInfo& f : env_flags()) {
    if (f.component == request.target) {
      text += fmt::format("{}={}\n", f.variable, env_flag_string(f.flag));
    }
  }
  return xxhash64(as_bytes(text));
}

std::string CompileCache::fingerprint_text(const std::string& target) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = fingerprints_.try_emplace(target);
  if (inserted) {
    it->second = fmt::format("kiln {}\ntarget {}\n", kiln_version(), target);
    for (const auto& [k, v] : device_fingerprint(target)) {
      it->second += fmt::format("{}={}\n", k, v);
    }
  }
  return it->second;
}

std::filesystem::path CompileCache::file_for(const ModelSource& model,
                                             const CompileRequest& request) const {
  return dir_ / fmt::format("{}-{}-{:016x}.kiln", file_safe(describe(model)),
                            file_safe(request.target), key(model, request));
}

CompileCache::Counters CompileCache::counters() const {
  return {memory_hits_.load(), disk_hits_.load(), compiles_.load(), rejected_files_.load(),
          store_failures_.load()};
}

Result<CompiledModel> CompileCache::get(const ModelSource& model, const CompileRequest& request) {
  return get(model, request, nullptr);
}

Result<CompiledModel> CompileCache::get(const ModelSource& model, const CompileRequest& request,
                                        std::shared_ptr<Graph> imported) {
  const uint64_t k = key(model, request);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Entry>& slot = entries_[{k, request.device}];
    if (slot == nullptr) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (entry->executable != nullptr) {
    ++memory_hits_;
    return CompiledModel{entry->executable, CompiledModel::From::kMemory, entry->artifact};
  }
  // What is loaded or compiled next lives on the request's device; the thread's own comes back.
  // (A target with no device here fails below, in make_target, saying why.)
  const bool devices = device_count(request.target) > 0;
  int before = 0;
  if (devices) {
    KILN_ASSIGN_OR_RETURN(before, use_device(request.target, request.device));
  }
  struct Restore {
    std::string_view target;
    int device;
    bool set;
    ~Restore() {
      if (set) (void)use_device(target, device);
    }
  } restore{request.target, before, devices};
  const fs::path file = file_for(model, request);
  if (use_disk_) {
    if (std::shared_ptr<Executable> hit = load_file(model, request, file)) {
      ++disk_hits_;
      entry->executable = std::move(hit);
      entry->artifact = file;
      return CompiledModel{entry->executable, CompiledModel::From::kDisk, file};
    }
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe,
                        compile_now(model, request, std::move(imported)));
  ++compiles_;
  const bool stored = use_disk_ && store(model, request, *exe, file);
  entry->executable = exe;
  entry->artifact = stored ? file : fs::path();
  return CompiledModel{std::move(exe), CompiledModel::From::kCompiled, entry->artifact};
}

std::shared_ptr<Executable> CompileCache::load_file(const ModelSource& model,
                                                    const CompileRequest& request,
                                                    const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    log(LogLevel::kInfo, "{}: no cached artifact {}; compiling", describe(model), file.string());
    return nullptr;
  }
  auto reject = [&](std::string_view why) -> std::shared_ptr<Executable> {
    ++rejected_files_;
    log(LogLevel::kWarning, "{}: cached artifact {} is not usable ({}); recompiling",
        describe(model), file.string(), why);
    return nullptr;
  };
  Result<Artifact> artifact = open_artifact(file.string());
  if (!artifact.ok()) return reject(artifact.status().message());
  const ArtifactHeader& h = artifact->header();
  if (h.source.size != model.size || h.source.hash != model.file_hash) {
    return reject(
        fmt::format("compiled from a model of {} bytes with hash {:016x}; this one has "
                    "{} bytes, hash {:016x}",
                    h.source.size, h.source.hash, model.size, model.file_hash));
  }
  if (h.target != request.target) {
    return reject(fmt::format("compiled for target {}, expected {}", h.target, request.target));
  }
  Result<LoadedArtifact> loaded = load_artifact(*artifact, request.options.threads);
  if (!loaded.ok()) return reject(loaded.status().message());
  log(LogLevel::kInfo, "{}: loaded cached artifact {}", describe(model), file.string());
  return loaded->executable;
}

Result<std::shared_ptr<Executable>> CompileCache::compile_now(const ModelSource& model,
                                                              const CompileRequest& request,
                                                              std::shared_ptr<Graph> graph) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, make_target(request.target));
  if (graph == nullptr) {
    std::shared_ptr<const std::string> bytes = model.bytes;
    if (bytes == nullptr) {
      KILN_ASSIGN_OR_RETURN(std::string read, read_file(model.path));
      bytes = std::make_shared<const std::string>(std::move(read));
      if (bytes->size() != model.size || xxhash64(as_bytes(*bytes)) != model.file_hash) {
        return failed_precondition_error(fmt::format(
            "{}: {} changed since it was read ({} bytes then, {} now); load the model again",
            describe(model), model.path, model.size, bytes->size()));
      }
    }
    ImportOptions import = request.import;
    import.external_data_dir = model.external_data_dir;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Model> imported,
                          import_onnx_bytes(as_bytes(*bytes), import,
                                            model.path.empty() ? describe(model) : model.path));
    graph = std::move(imported->graph);
  }
  if (request.rewrite) KILN_RETURN_IF_ERROR(request.rewrite(*graph, *target));
  return compile(std::move(graph), *target, request.options);
}

bool CompileCache::store(const ModelSource& model, const CompileRequest& request,
                         const Executable& exe, const fs::path& file) {
  ArtifactSource source;
  source.name = model.path.empty() ? describe(model) : fs::path(model.path).filename().string();
  source.size = model.size;
  source.hash = model.file_hash;
  source.options = request_options(request);
  source.recompile_command = fmt::format(
      "kiln compile {} --target {}", model.path.empty() ? source.name : model.path, request.target);
  for (const auto& [flag, value] : source.options) {
    source.recompile_command += value.empty() ? " --" + flag : fmt::format(" --{} {}", flag, value);
  }
  source.recompile_command += " -o " + file.string();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  Status saved = ec ? permission_denied_error(
                          fmt::format("cannot create \"{}\": {}", dir_.string(), ec.message()))
                    : save_artifact(file.string(), exe, request.options, source);
  if (!saved.ok()) {
    ++store_failures_;
    log(LogLevel::kWarning, "{}: cannot cache the compiled model as {}: {}", describe(model),
        file.string(), saved.message());
    return false;
  }
  log(LogLevel::kInfo, "{}: cached the compiled model as {}", describe(model), file.string());
  return true;
}

}  // namespace kiln::compiler
