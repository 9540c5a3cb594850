// SPDX-License-Identifier: Apache-2.0
// The compile-or-load service on a real model and real cache folders: hits, misses, damaged
// files, read-only folders and threads racing on one key.
#include "compiler/cache/compile_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "core/logging.h"
#include "core/testing/random.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

const char* const kModel = KILN_SOURCE_DIR "/examples/models/tiny_cnn.onnx";

// A fresh folder for one test, removed after it.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name)
      : path_(fs::temp_directory_path() /
              fmt::format("kiln_compile_cache_{}_{}", name, ::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Counts the warnings logged while it lives.
class WarningCount {
 public:
  WarningCount() {
    set_log_sink([this](LogLevel level, std::string_view) {
      if (level == LogLevel::kWarning) ++count_;
    });
  }
  ~WarningCount() { set_log_sink({}); }
  int count() const { return count_.load(); }

 private:
  std::atomic<int> count_{0};
};

// The cpu target where this build has it (the realistic case), else ref.
std::string test_target() {
  const std::vector<std::string> names = target_names();
  return std::find(names.begin(), names.end(), "cpu") != names.end() ? "cpu" : "ref";
}

CompileRequest request_for_batch(int64_t batch) {
  CompileRequest r;
  r.target = test_target();
  r.import.input_shapes["image"] = {batch, 1, 28, 28};
  return r;
}

// The model's output on a fixed random image batch.
std::vector<float> outputs_of(const Executable& exe, int64_t batch = 1) {
  std::vector<Argument> inputs;
  inputs.emplace_back(test::random_tensor(Shape{batch, 1, 28, 28}, 7, 1.0f));
  Result<std::vector<Argument>> out = exe.run(std::move(inputs));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  const Tensor& t = (*out)[0].tensor();
  return {t.data<float>(), t.data<float>() + t.numel()};
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CompileCache, AHitGivesTheSameOutputsWithoutCompiling) {
  TempFolder dir("hit");
  Result<ModelSource> model = ModelSource::from_file(kModel);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(model->label, "tiny_cnn.onnx");
  const CompileRequest request = request_for_batch(1);

  CompileCache first(dir.path());
  Result<CompiledModel> compiled = first.get(*model, request);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->from, CompiledModel::From::kCompiled);
  EXPECT_EQ(compiled->artifact, first.file_for(*model, request));
  EXPECT_EQ(compiled->artifact.parent_path(), dir.path());
  EXPECT_EQ(
      compiled->artifact.filename().string().rfind("tiny_cnn.onnx-" + request.target + "-", 0), 0u)
      << compiled->artifact;
  ASSERT_TRUE(fs::exists(compiled->artifact));
  const std::vector<float> expected = outputs_of(*compiled->executable);
  ASSERT_EQ(expected.size(), 10u);

  // The same cache again: from memory, the same executable.
  Result<CompiledModel> again = first.get(*model, request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->from, CompiledModel::From::kMemory);
  EXPECT_EQ(again->executable, compiled->executable);
  EXPECT_EQ(first.counters().compiles, 1);
  EXPECT_EQ(first.counters().memory_hits, 1);

  // Another cache on the folder (another process): from the file, which stays untouched.
  const fs::file_time_type written = fs::last_write_time(compiled->artifact);
  CompileCache second(dir.path());
  Result<CompiledModel> loaded = second.get(*model, request);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->from, CompiledModel::From::kDisk);
  EXPECT_EQ(second.counters().compiles, 0);
  EXPECT_EQ(second.counters().disk_hits, 1);
  EXPECT_EQ(fs::last_write_time(compiled->artifact), written);
  EXPECT_EQ(outputs_of(*loaded->executable), expected);
  EXPECT_EQ(files_in(dir.path()).size(), 1u);

  // The artifact says where it came from and how to make it again.
  Result<Artifact> artifact = open_artifact(compiled->artifact.string());
  ASSERT_TRUE(artifact.ok());
  EXPECT_EQ(artifact->header().source.name, "tiny_cnn.onnx");
  EXPECT_EQ(artifact->header().source.hash, model->file_hash);
  EXPECT_NE(artifact->header().source.recompile_command.find("--input-shape image=1,1,28,28"),
            std::string::npos)
      << artifact->header().source.recompile_command;
}

TEST(CompileCache, AHostTargetHasOneDeviceAndRefusesAnother) {
  TempFolder dir("device");
  Result<ModelSource> model = ModelSource::from_file(kModel);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  CompileRequest request = request_for_batch(1);
  EXPECT_EQ(device_count(request.target), 1);
  request.device = 1;
  CompileCache cache(dir.path());
  Result<CompiledModel> refused = cache.get(*model, request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("has 1 device; there is no device 1"),
            std::string::npos)
      << refused.status().to_string();
  EXPECT_TRUE(files_in(dir.path()).empty());
  request.device = 0;
  Result<CompiledModel> compiled = cache.get(*model, request);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(outputs_of(*compiled->executable).size(), 10u);
}

TEST(CompileCache, AChangedOptionOrModelMisses) {
  TempFolder dir("miss");
  Result<ModelSource> model = ModelSource::from_file(kModel);
  ASSERT_TRUE(model.ok());
  CompileCache cache(dir.path());
  const CompileRequest base = request_for_batch(1);
  ASSERT_TRUE(cache.get(*model, base).ok());

  CompileRequest batch2 = request_for_batch(2);
  CompileRequest seeded = base;
  seeded.options.seed = 5;
  CompileRequest rewritten = base;
  rewritten.rewrite_flags.emplace_back("fp16", "");
  int rewrites = 0;
  rewritten.rewrite = [&](Graph&, const Target&) {
    ++rewrites;
    return Status();
  };
  // The same rewrite over other data (int8 calibrated on another folder's contents).
  CompileRequest other_data = rewritten;
  other_data.data_hash = 0x1234;
  const uint64_t base_key = cache.key(*model, base);
  std::set<uint64_t> keys = {base_key};
  for (const CompileRequest* r : {&batch2, &seeded, &rewritten, &other_data}) {
    EXPECT_TRUE(keys.insert(cache.key(*model, *r)).second);
    Result<CompiledModel> c = cache.get(*model, *r);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->from, CompiledModel::From::kCompiled);
  }
  EXPECT_EQ(rewrites, 2);
  Result<CompiledModel> two = cache.get(*model, batch2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(outputs_of(*two->executable, 2).size(), 20u);

  // The target's own flags change what it compiles; another target's do not.
  {
    const std::string flag = base.target == "cpu" ? "KILN_CPU_CONV_LAYOUT" : "KILN_TRACE_PASSES";
    ::setenv("KILN_CUDA_LAYOUT", "nchw", 1);
    EXPECT_EQ(cache.key(*model, base), base_key);
    ::unsetenv("KILN_CUDA_LAYOUT");
    if (base.target == "cpu") {
      ::setenv(flag.c_str(), "any", 1);
      EXPECT_NE(cache.key(*model, base), base_key);
      ::unsetenv(flag.c_str());
    }
    EXPECT_EQ(cache.key(*model, base), base_key);
  }

  // A changed model (one byte more: ModelProto.doc_string) is another key, and another file.
  TempFolder models("miss_model");
  const fs::path copy = models.path() / "tiny_cnn.onnx";
  fs::copy_file(kModel, copy);
  std::ofstream(copy, std::ios::app | std::ios::binary) << "\x32\x01x";
  Result<ModelSource> changed = ModelSource::from_file(copy.string());
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_NE(changed->hash, model->hash);
  Result<CompiledModel> c = cache.get(*changed, base);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->from, CompiledModel::From::kCompiled);
  EXPECT_EQ(cache.counters().compiles, 6);
  EXPECT_EQ(files_in(dir.path()).size(), 6u);
}

TEST(CompileCache, ADamagedOrStaleFileIsCompiledOverWithAWarning) {
  TempFolder dir("damaged");
  Result<ModelSource> model = ModelSource::from_file(kModel);
  ASSERT_TRUE(model.ok());
  const CompileRequest request = request_for_batch(1);
  fs::path file;
  std::vector<float> expected;
  {
    CompileCache cache(dir.path());
    Result<CompiledModel> c = cache.get(*model, request);
    ASSERT_TRUE(c.ok());
    file = c->artifact;
    expected = outputs_of(*c->executable);
  }
  const auto size = fs::file_size(file);
  // Truncated, then not an artifact at all, then another model's artifact under this key's name.
  TempFolder models("damaged_model");
  const fs::path other_model = models.path() / "other.onnx";
  fs::copy_file(kModel, other_model);
  std::ofstream(other_model, std::ios::app | std::ios::binary) << "\x32\x01y";
  Result<ModelSource> other = ModelSource::from_file(other_model.string(), "tiny_cnn.onnx");
  ASSERT_TRUE(other.ok());
  std::vector<std::function<void()>> damages = {
      [&] { fs::resize_file(file, size / 2); },
      [&] { std::ofstream(file, std::ios::trunc) << "not an artifact"; },
      [&] {
        CompileCache elsewhere(models.path());
        Result<CompiledModel> c = elsewhere.get(*other, request);
        ASSERT_TRUE(c.ok());
        fs::copy_file(c->artifact, file, fs::copy_options::overwrite_existing);
      },
  };
  for (size_t i = 0; i < damages.size(); ++i) {
    SCOPED_TRACE(i);
    damages[i]();
    WarningCount warnings;
    CompileCache cache(dir.path());
    Result<CompiledModel> c = cache.get(*model, request);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->from, CompiledModel::From::kCompiled);
    EXPECT_EQ(cache.counters().rejected_files, 1);
    EXPECT_EQ(warnings.count(), 1);
    EXPECT_EQ(outputs_of(*c->executable), expected);
    // The file is whole again, and the next cache loads it.
    EXPECT_TRUE(open_artifact(file.string()).ok());
    CompileCache next(dir.path());
    Result<CompiledModel> n = next.get(*model, request);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->from, CompiledModel::From::kDisk);
  }
}

TEST(CompileCache, AReadOnlyModelFolderAndAnUnwritableCacheStillCompile) {
  TempFolder models("readonly");
  const fs::path copy = models.path() / "tiny_cnn.onnx";
  fs::copy_file(kModel, copy);
  ::chmod(models.path().c_str(), 0555);
  TempFolder dir("readonly_cache");
  Result<ModelSource> model = ModelSource::from_file(copy.string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  CompileCache cache(dir.path());
  Result<CompiledModel> c = cache.get(*model, request_for_batch(1));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->artifact.parent_path(), dir.path());
  EXPECT_EQ(files_in(models.path()), std::vector<fs::path>{copy});  // nothing beside the model

  // A cache folder that cannot be made (a file is in the way): compiled, not cached, a warning.
  const fs::path blocked = dir.path() / "a-file" / "cache";
  std::ofstream(dir.path() / "a-file") << "in the way";
  WarningCount warnings;
  CompileCache unwritable(blocked);
  Result<CompiledModel> u = unwritable.get(*model, request_for_batch(1));
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->from, CompiledModel::From::kCompiled);
  EXPECT_TRUE(u->artifact.empty());
  EXPECT_EQ(unwritable.counters().store_failures, 1);
  EXPECT_EQ(warnings.count(), 1);
  EXPECT_EQ(outputs_of(*u->executable), outputs_of(*c->executable));

  // Memory only: nothing written anywhere.
  TempFolder unused("memory_only");
  CompileCache memory(unused.path(), false);
  ASSERT_TRUE(memory.get(*model, request_for_batch(1)).ok());
  EXPECT_TRUE(files_in(unused.path()).empty());
}

TEST(CompileCache, ThreadsRacingOnOneKeyAllSucceed) {
  TempFolder dir("race");
  Result<ModelSource> model = ModelSource::from_file(kModel);
  ASSERT_TRUE(model.ok());
  const CompileRequest request = request_for_batch(3);
  // Two caches on one folder (two processes) and two threads on each.
  CompileCache a(dir.path());
  CompileCache b(dir.path());
  std::vector<Result<CompiledModel>> results(4, internal_error("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = (i % 2 == 0 ? a : b).get(*model, request); });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> expected;
  for (const Result<CompiledModel>& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::vector<float> out = outputs_of(*r->executable, 3);
    if (expected.empty()) expected = out;
    EXPECT_EQ(out, expected);
  }
  // Each cache compiled or loaded once; its second thread waited and took it from memory.
  for (const CompileCache* c : {&a, &b}) {
    EXPECT_EQ(c->counters().compiles + c->counters().disk_hits, 1);
    EXPECT_EQ(c->counters().memory_hits, 1);
  }
  EXPECT_EQ(files_in(dir.path()).size(), 1u);  // no temporary file left behind
  EXPECT_TRUE(open_artifact(files_in(dir.path())[0].string()).ok());
}

TEST(CompileCache, ModelBytesAndErrors) {
  TempFolder dir("bytes");
  Result<std::string> read = read_file(kModel);
  ASSERT_TRUE(read.ok());
  auto bytes = std::make_shared<const std::string>(*read);
  Result<ModelSource> model = ModelSource::from_bytes(bytes, "buffer");
  ASSERT_TRUE(model.ok());
  Result<ModelSource> file = ModelSource::from_file(kModel);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(model->hash, file->hash);
  CompileCache cache(dir.path());
  Result<CompiledModel> c = cache.get(*model, request_for_batch(1));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->artifact.filename().string().rfind("buffer-", 0), 0u);

  Result<ModelSource> missing = ModelSource::from_file(dir.path() / "absent.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.onnx"), std::string::npos);
  CompileRequest bad = request_for_batch(1);
  bad.target = "tpu";
  Result<CompiledModel> no_target = cache.get(*model, bad);
  ASSERT_FALSE(no_target.ok());
  EXPECT_NE(no_target.status().message().find("tpu"), std::string::npos);
  // A model that does not import is an error naming it, and nothing is cached.
  auto garbage = std::make_shared<const std::string>("not a model at all");
  Result<ModelSource> junk = ModelSource::from_bytes(garbage, "junk");
  ASSERT_TRUE(junk.ok());
  Result<CompiledModel> j = cache.get(*junk, request_for_batch(1));
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("junk"), std::string::npos) << j.status().to_string();
  EXPECT_EQ(files_in(dir.path()).size(), 1u);
}

}  // namespace
}  // namespace kiln::compiler
