// SPDX-License-Identifier: Apache-2.0
// The compiler backend's artifact cache: the first load writes it, the next load uses it, and a
// corrupted or stale cache file is replaced without failing the load; and the precision
// parameters (fp16, bf16, int8 with its calibration folder).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "server/core/server.h"
#include "server/core/test_repository.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

// Collects the log messages at info and above while it lives.
class LogCapture {
 public:
  LogCapture() : level_(log_level()) {
    set_log_level(LogLevel::kInfo);
    set_log_sink([this](LogLevel, std::string_view message) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.emplace_back(message);
    });
  }
  ~LogCapture() {
    set_log_sink({});
    set_log_level(level_);
  }
  // How many messages contain `text`; clears them when `clear`.
  int count(const std::string& text, bool clear = true) {
    std::lock_guard<std::mutex> lock(mutex_);
    int n = static_cast<int>(std::count_if(messages_.begin(), messages_.end(), [&](const auto& m) {
      return m.find(text) != std::string::npos;
    }));
    if (clear) messages_.clear();
    return n;
  }

 private:
  LogLevel level_;
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

// The files below `dir`, at any depth.
std::vector<fs::path> cache_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

// The output of the mnist model on a fixed random image of 3 rows.
std::vector<float> classify(Server& s) {
  Tensor t(DType::kF32, Shape{3, 1, 28, 28});
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (float& v : t.span<float>()) v = dist(rng);
  InferenceRequest r;
  r.model = "mnist";
  r.inputs.push_back({"image", t, {}});
  Result<InferenceResponse> response = s.infer(std::move(r)).get();
  EXPECT_TRUE(response.ok()) << response.status().to_string();
  if (!response.ok()) return {};
  const Tensor& out = response->outputs.at(0).data;
  return {out.data<float>(), out.data<float>() + out.shape().numel()};
}

TEST(CompilerBackendCache, SecondLoadUsesTheCacheAndABadFileIsReplaced) {
  fs::path root = testing::make_test_repository("cache");
  fs::remove_all(root / "broken");
  // issue 28: the cache is outside the repository, which is never written to.
  const fs::path cache_dir =
      fs::temp_directory_path() / ("kiln_cache_" + std::to_string(::getpid()));
  fs::remove_all(cache_dir);
  const size_t repository_files = cache_files(root).size();
  LogCapture logs;
  ServerOptions options{root, false, {"mnist"}};
  options.cache_dir = cache_dir;
  Result<std::unique_ptr<Server>> created = Server::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;

  // The first load compiles and writes one artifact for the cpu target and batch 4.
  EXPECT_EQ(logs.count("cached the compiled model as"), 1);
  std::vector<fs::path> files = cache_files(cache_dir);
  ASSERT_EQ(files.size(), 1u);
  const fs::path file = files[0];
  EXPECT_EQ(file.extension(), ".kiln");
  // compiler/cache names it <model>-<target>-<key>.kiln.
  EXPECT_EQ(file.filename().string().rfind("mnist-cpu-", 0), 0u) << file;
  EXPECT_EQ(file.parent_path(), cache_dir) << file;
  EXPECT_EQ(cache_files(root).size(), repository_files);
  Result<compiler::Artifact> artifact = compiler::open_artifact(file.string());
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  Result<std::string> model = read_file((root / "mnist" / "1" / "model.onnx").string());
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(artifact
                  ->check_source(std::span<const uint8_t>(
                      reinterpret_cast<const uint8_t*>(model->data()), model->size()))
                  .ok());
  const std::vector<float> expected = classify(s);
  ASSERT_EQ(expected.size(), 30u);

  // The second load uses it: no compile, the file untouched, the same outputs.
  const fs::file_time_type written = fs::last_write_time(file);
  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("loaded cached artifact", false), 1);
  EXPECT_EQ(logs.count("cached the compiled model as"), 0);
  EXPECT_EQ(fs::last_write_time(file), written);
  EXPECT_EQ(classify(s), expected);

  // A corrupted cache file is reported, the model recompiled and the file replaced. (Unloaded
  // first: the loaded model maps the file's weights.)
  ASSERT_TRUE(s.unload_model("mnist").ok());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    f.write("garbage!", 8);
  }
  ASSERT_FALSE(compiler::open_artifact(file.string()).ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("is not usable", false), 1);
  EXPECT_EQ(logs.count("cached the compiled model as"), 1);
  EXPECT_TRUE(compiler::open_artifact(file.string()).ok());
  EXPECT_EQ(classify(s), expected);

  // A file that is not an artifact at all does not fail the load either.
  std::ofstream(file, std::ios::trunc) << "not an artifact";
  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("is not usable", false), 1);
  EXPECT_EQ(logs.count("cached the compiled model as"), 1);
  EXPECT_EQ(classify(s), expected);

  // A changed model is another key (its bytes are hashed): compiled and cached beside the first.
  // (Appended bytes 0x32 0x01 'x' set ModelProto.doc_string, so the model stays valid.)
  std::ofstream(root / "mnist" / "1" / "model.onnx", std::ios::app | std::ios::binary)
      << "\x32\x01x";
  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("no cached artifact", false), 1);
  EXPECT_EQ(logs.count("cached the compiled model as"), 1);
  EXPECT_EQ(cache_files(cache_dir).size(), 2u);
  EXPECT_EQ(cache_files(root).size(), repository_files);

  // The parameter cache = false turns it off.
  std::ofstream(root / "mnist" / "config.toml", std::ios::app) << "cache = false\n";
  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count(cache_dir.string()), 0);
  s.shutdown();
  EXPECT_EQ(cache_files(root).size(), repository_files);
  fs::remove_all(root);
  fs::remove_all(cache_dir);
}

// A cache folder inside the repository is refused (with a warning): the model loads and runs, and
// nothing is written into the repository.
TEST(CompilerBackendCache, ACacheInsideTheRepositoryIsNeverWritten) {
  fs::path root = testing::make_test_repository("cache_inside");
  fs::remove_all(root / "broken");
  const size_t repository_files = cache_files(root).size();
  LogCapture logs;
  ServerOptions options{root, false, {"mnist"}};
  options.cache_dir = root / "mnist" / "cache";
  Result<std::unique_ptr<Server>> created = Server::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  EXPECT_EQ(logs.count("is inside the model repository"), 1);
  EXPECT_EQ(classify(**created).size(), 30u);
  EXPECT_EQ(cache_files(root).size(), repository_files);
  (*created)->shutdown();
  fs::remove_all(root);
}

// Fault injection (issue 28): the disk fills up while the compiled model is cached. Writes past
// RLIMIT_FSIZE fail with EFBIG (SIGXFSZ ignored), as on a full disk: the load still succeeds, the
// model serves, a warning says why nothing was cached, and once there is room again the next load
// writes the cache and the one after uses it.
TEST(CompilerBackendCache, ADiskFullWhileCachingDoesNotFailTheLoad) {
  fs::path root = testing::make_test_repository("diskfull");
  fs::remove_all(root / "broken");
  const fs::path cache_dir =
      fs::temp_directory_path() / ("kiln_cache_full_" + std::to_string(::getpid()));
  fs::remove_all(cache_dir);
  LogCapture logs;
  ServerOptions options{root, false, {}};
  options.cache_dir = cache_dir;
  Result<std::unique_ptr<Server>> created = Server::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;

  ::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit full = saved;
  full.rlim_cur = 4096;  // far below the artifact's size
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &full), 0);
  Status loaded = s.load_model("mnist");
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  EXPECT_EQ(logs.count("cannot cache the compiled model", false), 1);
  EXPECT_EQ(logs.count("cached the compiled model as"), 0);
  const std::vector<float> expected = classify(s);
  ASSERT_EQ(expected.size(), 30u);

  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("cached the compiled model as"), 1);
  ASSERT_TRUE(s.unload_model("mnist").ok());
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(logs.count("loaded cached artifact"), 1);
  EXPECT_EQ(classify(s), expected);
  s.shutdown();
  fs::remove_all(root);
  fs::remove_all(cache_dir);
}

// Rewrites the mnist model's config.toml with `extra` lines in [parameters] (and `top` lines
// above it), then loads it again.
Status reload_mnist(Server& s, const fs::path& root, const std::string& extra,
                    const std::string& top = "") {
  std::ofstream(root / "mnist" / "config.toml", std::ios::trunc)
      << "platform = \"onnx_onnxv1\"\nmax_batch_size = 4\n"
      << top
      << "[dynamic_batching]\nmax_queue_delay_microseconds = 2000\n[parameters]\ntarget = "
         "\"cpu\"\ncache = false\n"
      << extra;
  (void)s.unload_model("mnist");
  return s.load_model("mnist");
}

float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

// Parameters precision (fp16, bf16, int8 with a calibration folder) compile the model the way
// `kiln compile --fp16/--bf16/--int8` does; the answers stay close to fp32's, and every mistake
// in the parameters is a load error that names it.
TEST(CompilerBackendPrecision, ReducedPrecisionsServeCloseAnswersAndBadParametersFailTheLoad) {
  fs::path root = testing::make_test_repository("precision");
  fs::remove_all(root / "broken");
  LogCapture logs;
  Result<std::unique_ptr<Server>> created = Server::create(ServerOptions{root, false, {"mnist"}});
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;
  ASSERT_TRUE(reload_mnist(s, root, "").ok());
  const std::vector<float> fp32 = classify(s);
  ASSERT_EQ(fp32.size(), 30u);
  float range = 0;
  for (float v : fp32) range = std::max(range, std::abs(v));

  for (const char* precision : {"fp16", "bf16"}) {
    Status loaded = reload_mnist(s, root, fmt::format("precision = \"{}\"\n", precision));
    ASSERT_TRUE(loaded.ok()) << precision << ": " << loaded.to_string();
    const std::vector<float> got = classify(s);
    EXPECT_LT(max_abs_difference(got, fp32), 0.02f * range) << precision;
    EXPECT_NE(got, fp32) << precision << " ran in fp32";
  }

  // int8: 8 single-image calibration files, joined into batches of the compiled batch (4).
  const fs::path calibration = root / "mnist" / "1" / "calibration";
  fs::create_directories(calibration);
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(write_npy((calibration / fmt::format("{:02}.npy", i)).string(),
                          testing::random_image(1, 100 + i).view())
                    .ok());
  }
  Status int8 = reload_mnist(s, root, "precision = \"int8\"\ncalibration = \"calibration\"\n");
  ASSERT_TRUE(int8.ok()) << int8.to_string();
  EXPECT_EQ(logs.count("int8: "), 1);
  const std::vector<float> got = classify(s);
  EXPECT_LT(max_abs_difference(got, fp32), 0.1f * range);
  EXPECT_NE(got, fp32);

  struct Bad {
    std::string parameters;
    std::string top;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"precision = \"fp8\"\n", "", "precision must be fp32, fp16, bf16 or int8, got \"fp8\""},
      {"precision = \"int8\"\n", "", "needs parameter calibration"},
      {"precision = \"fp16\"\ncalibration = \"calibration\"\n", "", "are for precision \"int8\""},
      {"precision = \"int8\"\ncalibration = \"../../mnist\"\n", "", "without \"..\""},
      {"precision = \"int8\"\ncalibration = \"missing\"\n", "", "does not exist"},
      {"precision = \"int8\"\ncalibration = \"model.onnx\"\n", "", "is not a folder"},
      {"", "gpus = [0]\n", "gpus lists GPUs but the target is cpu"},
  };
  for (const Bad& b : bad) {
    Status loaded = reload_mnist(s, root, b.parameters, b.top);
    ASSERT_FALSE(loaded.ok()) << b.parameters << b.top;
    EXPECT_NE(loaded.message().find(b.says), std::string::npos) << loaded.to_string();
  }
  s.shutdown();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server
