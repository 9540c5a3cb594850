// SPDX-License-Identifier: Apache-2.0
// The one compile-or-load service: an ONNX model plus compile options in, a loaded executable out,
// from memory, from a .kiln artifact cached on disk, or compiled (and cached) now.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "core/status.h"

namespace kiln::compiler {

// An ONNX model as the cache knows it: its bytes are hashed once, here, so each get() only hashes
// a few strings.
struct ModelSource {
  // Names the model in messages and cache file names: "mnist", "resnet50.onnx".
  std::string label;
  // The .onnx file; empty for a model given as bytes.
  std::string path;
  // A model given as bytes keeps them; a file is read again only to compile.
  std::shared_ptr<const std::string> bytes;
  // Folder of the external data files (default: the model file's folder).
  std::string external_data_dir;
  uint64_t size = 0;       // of the .onnx bytes
  uint64_t file_hash = 0;  // xxhash64 of the .onnx bytes (what an artifact's header records)
  // file_hash and the contents of every external data file the model names: what the cache key
  // holds, so changed external weights miss too.
  uint64_t hash = 0;

  // Reads and hashes `path` (and its external data files). `label` defaults to the file name.
  static Result<ModelSource> from_file(const std::string& path, std::string label = {});
  // Hashes `bytes`; external data is looked for in `external_data_dir`.
  static Result<ModelSource> from_bytes(std::shared_ptr<const std::string> bytes, std::string label,
                                        std::string external_data_dir = {});
};

// What to compile the model into.
struct CompileRequest {
  std::string target = "cpu";
  // input_shapes and default_dim_value; external_data_dir comes from the ModelSource.
  ImportOptions import;
  // optimize and seed are part of the key; threads only sets how the executable runs.
  CompileOptions options;
  // A rewrite of the imported graph before compiling (precision conversion, quantization), or
  // null. It runs only on a miss.
  std::function<Status(Graph&, const Target&)> rewrite;
  // What the rewrite does, as `kiln compile` flags without the dashes ({"fp16", ""}): part of the
  // key (it must change whenever the rewrite's result would) and of the artifact's options.
  std::vector<std::pair<std::string, std::string>> rewrite_flags;
  // A hash of what the rewrite reads besides the model (int8's calibration data, which the flags
  // only name by folder), 0 for none: part of the key only.
  uint64_t data_hash = 0;
  // The device of the target the executable is put on (cuda: a GPU index). Not part of the key:
  // one artifact serves every device; this process keeps one executable per device.
  int device = 0;
};

struct CompiledModel {
  enum class From { kMemory, kDisk, kCompiled };
  std::shared_ptr<Executable> executable;
  From from = From::kCompiled;
  std::filesystem::path artifact;  // the cache file; empty when nothing is on disk
};

// The default folder: cache_root()/artifacts ($KILN_CACHE_DIR/artifacts, else
// $XDG_CACHE_HOME/kiln/artifacts, else ~/.cache/kiln/artifacts). Never a model's folder.
std::filesystem::path default_compile_cache_dir();

// Compiles each (model, request) once. The key is a hash of the model's bytes (ModelSource::hash),
// the request (target, input shapes, default dim, optimize, seed, rewrite flags), the kiln version,
// this machine's fingerprint for the target and the values of the target's own flags (KILN_CPU_*,
// KILN_CUDA_*: they change what is compiled). A hit is served from memory, else from
// <dir>/<label>-<target>-<key>.kiln; a miss compiles and writes that file through a temporary file
// and a rename, so concurrent processes never read half a file (the last writer wins; both
// files are the same). A cache file that is damaged, truncated, stale or made elsewhere is
// recompiled over with a warning; a folder that cannot be written only costs the caching (a
// warning). Thread-safe: threads asking for one key wait for one compile.
class CompileCache {
 public:
  // `dir` empty: default_compile_cache_dir(). With `use_disk` false, only memory.
  explicit CompileCache(std::filesystem::path dir = {}, bool use_disk = true);

  Result<CompiledModel> get(const ModelSource& model, const CompileRequest& request);
  // get() for a model the caller has imported already with request.import (the graph is used,
  // and changed by the rewrite, only on a miss).
  Result<CompiledModel> get(const ModelSource& model, const CompileRequest& request,
                            std::shared_ptr<Graph> imported);

  // The key and the cache file of `request` for `model`.
  uint64_t key(const ModelSource& model, const CompileRequest& request) const;
  std::filesystem::path file_for(const ModelSource& model, const CompileRequest& request) const;

  const std::filesystem::path& dir() const { return dir_; }
  bool uses_disk() const { return use_disk_; }

  // What get() did so far, for tests and logs.
  struct Counters {
    int64_t memory_hits = 0;
    int64_t disk_hits = 0;
    int64_t compiles = 0;
    int64_t rejected_files = 0;  // cache files not usable (damaged, stale): compiled over
    int64_t store_failures = 0;  // compiled but not written
  };
  Counters counters() const;

 private:
  struct Entry {
    std::mutex mutex;  // held while the entry is filled: one compile per key
    std::shared_ptr<Executable> executable;
    std::filesystem::path artifact;
  };
  std::shared_ptr<Executable> load_file(const ModelSource& model, const CompileRequest& request,
                                        const std::filesystem::path& file);
  Result<std::shared_ptr<Executable>> compile_now(const ModelSource& model,
                                                  const CompileRequest& request,
                                                  std::shared_ptr<Graph> imported);
  bool store(const ModelSource& model, const CompileRequest& request, const Executable& exe,
             const std::filesystem::path& file);

  // kiln_version() and device_fingerprint(target) as the key's text, computed once per target.
  std::string fingerprint_text(const std::string& target) const;

  std::filesystem::path dir_;
  bool use_disk_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::string> fingerprints_;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<Entry>> entries_;  // (key, device)
  std::atomic<int64_t> memory_hits_{0};
  std::atomic<int64_t> disk_hits_{0};
  std::atomic<int64_t> compiles_{0};
  std::atomic<int64_t> rejected_files_{0};
  std::atomic<int64_t> store_failures_{0};
};

}  // namespace kiln::compiler
