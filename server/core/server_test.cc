// SPDX-License-Identifier: Apache-2.0
// The in-process server on a real repository: health, metadata, load/unload, workers, request
// checks, the compiler backend against running the model directly, and many threads at once.
#include "server/core/server.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <thread>

#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "server/core/test_repository.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

using testing::random_image;

InferenceRequest request(std::string model, std::vector<InferTensor> inputs, std::string id = "") {
  InferenceRequest r;
  r.model = std::move(model);
  r.id = std::move(id);
  r.inputs = std::move(inputs);
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(testing::make_test_repository("core"));
    Result<std::unique_ptr<Server>> s = Server::create({*root_, true, {}});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }
  static Server* server_;
  static fs::path* root_;
};
Server* ServerTest::server_ = nullptr;
fs::path* ServerTest::root_ = nullptr;

TEST_F(ServerTest, ABrokenModelMakesTheServerUnreadyAndSaysWhy) {
  EXPECT_TRUE(server_->live());
  EXPECT_FALSE(server_->ready());
  bool found = false;
  for (const RepositoryEntry& e : server_->repository_index()) {
    if (e.name != "broken") continue;
    found = true;
    EXPECT_EQ(e.state, "UNAVAILABLE");
    EXPECT_NE(e.reason.find("max_batch"), std::string::npos) << e.reason;
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(server_->model_ready("broken").value(), false);
  EXPECT_EQ(server_->model_ready("echo").value(), true);
  EXPECT_EQ(server_->model_ready("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->model_ready("echo", "2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->model_ready("echo", "1").value(), true);
}

TEST_F(ServerTest, MetadataHasTheModelsRealTensors) {
  Result<ModelMetadata> md = server_->model_metadata("mnist");
  ASSERT_TRUE(md.ok()) << md.status().to_string();
  EXPECT_EQ(md->versions, (std::vector<std::string>{"1"}));
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].name, "image");
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  ASSERT_EQ(md->outputs.size(), 1u);
  EXPECT_EQ(md->outputs[0].name, "probabilities");
  EXPECT_EQ(md->outputs[0].shape, (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(server_->metadata().name, "kiln");
}

TEST_F(ServerTest, EchoReturnsItsInputs) {
  Tensor a = Tensor::from_vector<int64_t>({1, 2, 3});
  Tensor s(DType::kString, Shape{2});
  s.data<std::string>()[0] = "hello";
  s.data<std::string>()[1] = std::string("\0bin", 4);
  Result<InferenceResponse> r =
      server_->infer(request("echo", {{"a", a, {}}, {"s", s, {}}}, "req-1")).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "echo");
  EXPECT_EQ(r->version, "1");
  EXPECT_EQ(r->id, "req-1");
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_TRUE(r->outputs[0].data.equals(a));
  EXPECT_TRUE(r->outputs[1].data.equals(s));
}

TEST_F(ServerTest, TheCompilerBackendMatchesRunningTheModelDirectly) {
  auto model = compiler::import_onnx_file(testing::tiny_cnn_path(), {{{"image", {3, 1, 28, 28}}}});
  ASSERT_TRUE(model.ok());
  auto target = compiler::make_target("ref");
  ASSERT_TRUE(target.ok());
  auto exe =
      compiler::compile(std::shared_ptr<compiler::Graph>(std::move((*model)->graph)), **target);
  ASSERT_TRUE(exe.ok());
  Tensor images = random_image(3, 7);
  auto expected = (*exe)->run({compiler::Argument(images)});
  ASSERT_TRUE(expected.ok());
  const float* want = (*expected)[0].tensor().data<float>();

  // Three requests of one image each, sent at once, are batched and each gets its own row.
  std::vector<std::future<Result<InferenceResponse>>> futures;
  for (int i = 0; i < 3; ++i) {
    Tensor one(DType::kF32, Shape{1, 1, 28, 28});
    std::copy_n(images.data<float>() + i * 784, 784, one.data<float>());
    futures.push_back(server_->infer(request("mnist", {{"image", one, {}}}, std::to_string(i))));
  }
  for (int i = 0; i < 3; ++i) {
    Result<InferenceResponse> r = futures[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->id, std::to_string(i));
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].name, "probabilities");
    ASSERT_EQ(r->outputs[0].data.shape(), (Shape{1, 10}));
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(r->outputs[0].data.data<float>()[k], want[i * 10 + k], 1e-4f);
    }
  }
  // A request of 3 images in one tensor gives the same rows.
  Result<InferenceResponse> r = server_->infer(request("mnist", {{"image", images, {}}})).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->outputs[0].data.shape(), (Shape{3, 10}));
  for (int k = 0; k < 30; ++k) EXPECT_NEAR(r->outputs[0].data.data<float>()[k], want[k], 1e-4f);
}

void expect_rejected(Server* server, InferenceRequest r, StatusCode code, const std::string& part) {
  Result<InferenceResponse> resp = server->infer(std::move(r)).get();
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), code) << resp.status().to_string();
  EXPECT_NE(resp.status().message().find(part), std::string_view::npos)
      << "missing \"" << part << "\" in: " << resp.status().message();
}

TEST_F(ServerTest, BadRequestsGetClearErrors) {
  Tensor img = random_image(1, 1);
  expect_rejected(server_, request("nope", {{"image", img, {}}}), StatusCode::kNotFound,
                  "model \"nope\" does not exist");
  InferenceRequest v = request("mnist", {{"image", img, {}}});
  v.version = "9";
  expect_rejected(server_, v, StatusCode::kNotFound, "no version 9");
  expect_rejected(server_, request("mnist", {{"img", img, {}}}), StatusCode::kInvalidArgument,
                  "has no input \"img\"; its inputs are: image");
  expect_rejected(server_,
                  request("mnist", {{"image", Tensor(DType::kI64, Shape{1, 1, 28, 28}), {}}}),
                  StatusCode::kInvalidArgument, "expected FP32, got INT64");
  expect_rejected(server_, request("mnist", {{"image", Tensor(DType::kF32, Shape{1, 28, 28}), {}}}),
                  StatusCode::kInvalidArgument, "expected shape [-1,1,28,28], got [1,28,28]");
  expect_rejected(server_, request("mnist", {{"image", random_image(5, 1), {}}}),
                  StatusCode::kInvalidArgument, "outside 1..4");
  expect_rejected(server_, request("mnist", {}), StatusCode::kInvalidArgument, "no inputs");
  InferenceRequest out = request("mnist", {{"image", img, {}}});
  out.outputs.push_back({"logits", {}});
  expect_rejected(server_, out, StatusCode::kInvalidArgument, "no output \"logits\"");
  InferenceRequest prio = request("echo", {{"image", img, {}}});
  prio.parameters.set("priority", std::string("high"));
  expect_rejected(server_, prio, StatusCode::kInvalidArgument, "parameter \"priority\"");
  expect_rejected(server_, request("broken", {{"x", img, {}}}), StatusCode::kUnavailable,
                  "not ready");
}

TEST_F(ServerTest, StatisticsCountRequestsAndBatches) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        server_->infer(request("echo_batched", {{"x", random_image(1, 1), {}}})).get().ok());
  }
  Result<std::vector<ModelStatistics>> stats = server_->statistics("echo_batched");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  const ModelStatistics& s = (*stats)[0];
  EXPECT_GE(s.success.count, 4u);
  EXPECT_GE(s.inference_count, 4u);
  EXPECT_GE(s.execution_count, 1u);
  EXPECT_GT(s.last_inference_ms, 0u);
  EXPECT_EQ(server_->statistics("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(ServerTest, ManyThreadsGetTheirOwnResponses) {
  constexpr int kThreads = 16, kRequests = 100;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int i = 0; i < kRequests; ++i) {
        int64_t n = 1 + static_cast<int64_t>(rng() % 64);
        std::vector<int32_t> values(static_cast<size_t>(n));
        for (auto& v : values) v = static_cast<int32_t>(rng());
        Tensor x = Tensor::from_vector<int32_t>(values);
        std::string id = std::to_string(t) + ":" + std::to_string(i);
        Result<InferenceResponse> r =
            server_->infer(request(i % 2 ? "echo" : "echo_batched", {{"x", x, {}}}, id)).get();
        if (!r.ok() || r->id != id || r->outputs.size() != 1 || !r->outputs[0].data.equals(x)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ServerLifecycle, LoadUnloadWorkersAndDrainOnShutdown) {
  fs::path root = testing::make_test_repository("life");
  fs::remove_all(root / "broken");
  Result<std::unique_ptr<Server>> created = Server::create({root, false, {"echo"}});
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;
  EXPECT_TRUE(s.ready());
  EXPECT_EQ(s.model_ready("mnist").value(), false);
  ASSERT_TRUE(s.load_model("mnist").ok());
  EXPECT_EQ(s.model_ready("mnist").value(), true);
  ASSERT_TRUE(s.unload_model("mnist").ok());
  EXPECT_EQ(s.model_ready("mnist").value(), false);
  EXPECT_EQ(s.load_model("missing").code(), StatusCode::kNotFound);

  // A Triton config.pbtxt model (dims without the batch dim) loads and serves.
  fs::create_directories(root / "triton" / "1");
  fs::copy_file(testing::tiny_cnn_path(), root / "triton" / "1" / "model.onnx");
  std::ofstream(root / "triton" / "config.pbtxt")
      << "backend: \"onnxruntime\"\nmax_batch_size: 2\n"
         "input [ { name: \"image\" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] } ]\n"
         "dynamic_batching { }\n";
  ASSERT_TRUE(s.load_model("triton").ok());
  Result<InferenceResponse> triton =
      s.infer(request("triton", {{"image", random_image(2, 5), {}}})).get();
  ASSERT_TRUE(triton.ok()) << triton.status().to_string();
  EXPECT_EQ(triton->outputs.at(0).data.shape(), (Shape{2, 10}));

  // A second version with version_policy "all" serves both.
  fs::create_directories(root / "echo" / "2");
  std::ofstream(root / "echo" / "config.toml") << "backend = \"echo\"\nversion_policy = \"all\"\n";
  ASSERT_TRUE(s.load_model("echo").ok());
  EXPECT_EQ(s.model_metadata("echo")->versions, (std::vector<std::string>{"1", "2"}));
  InferenceRequest v1 = request("echo", {{"x", Tensor::from_vector<int32_t>({1}), {}}});
  v1.version = "1";
  EXPECT_EQ(s.infer(v1).get()->version, "1");
  EXPECT_EQ(s.infer(request("echo", {{"x", Tensor::from_vector<int32_t>({1}), {}}})).get()->version,
            "2");

  // workerLoad returns the endpoint; the same parameters share it, other ones get a new one.
  Parameters p;
  p.set("max_batch_size", int64_t{4});
  Result<std::string> e1 = s.load_worker("echo", p);
  ASSERT_TRUE(e1.ok()) << e1.status().to_string();
  EXPECT_EQ(*e1, "echo-1");  // "echo" is a repository model
  EXPECT_EQ(s.load_worker("echo", p).value(), "echo-1");
  Parameters model;
  model.set("model", "mnist/1/model.onnx");  // relative to the repository
  model.set("batch", int64_t{2});
  Result<std::string> mx = s.load_worker("migraphx", model);
  ASSERT_TRUE(mx.ok()) << mx.status().to_string();
  EXPECT_EQ(*mx, "migraphx");
  EXPECT_EQ(s.model_metadata("migraphx")->inputs[0].name, "image");
  EXPECT_EQ(s.load_worker("tensorflow", p).status().code(), StatusCode::kNotFound);
  // pad_batch false compiles each batch size on first use; the rows match the padded model's.
  Parameters exact = model;
  exact.set("pad_batch", false);
  exact.set("batch", int64_t{4});
  Result<std::string> unpadded = s.load_worker("compiler", exact);
  ASSERT_TRUE(unpadded.ok()) << unpadded.status().to_string();
  Tensor three = random_image(3, 11);
  Result<InferenceResponse> a = s.infer(request(*unpadded, {{"image", three, {}}})).get();
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->outputs[0].data.shape(), (Shape{3, 10}));
  for (int i = 0; i < 3; ++i) {
    Tensor one(DType::kF32, Shape{1, 1, 28, 28});
    std::copy_n(three.data<float>() + i * 784, 784, one.data<float>());
    Result<InferenceResponse> b = s.infer(request(*mx, {{"image", one, {}}})).get();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(a->outputs[0].data.data<float>()[i * 10 + k], b->outputs[0].data.data<float>()[k],
                  1e-5f);
    }
  }
  ASSERT_TRUE(s.unload_worker("echo-1").ok());
  EXPECT_EQ(s.model_ready("echo-1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.unload_worker("echo").code(), StatusCode::kNotFound);  // not a worker

  // Shutdown runs what is queued: 50 requests in flight all complete.
  std::vector<std::future<Result<InferenceResponse>>> inflight;
  for (int i = 0; i < 50; ++i) {
    inflight.push_back(s.infer(request("migraphx", {{"image", random_image(1, 3), {}}})));
  }
  s.shutdown();
  EXPECT_FALSE(s.ready());
  int done = 0;
  for (auto& f : inflight) {
    Result<InferenceResponse> r = f.get();
    if (r.ok() && r->outputs.at(0).data.shape() == Shape({1, 10})) ++done;
  }
  EXPECT_EQ(done, 50);
  Result<InferenceResponse> after =
      s.infer(request("echo", {{"x", Tensor::from_vector<int32_t>({1}), {}}})).get();
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  fs::remove_all(root);
}

bool eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 500; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ServerPolling, NewChangedAndRemovedModelsAreFollowed) {
  fs::path root = testing::make_test_repository("poll");
  fs::remove_all(root / "broken");
  fs::remove_all(root / "mnist");
  ServerOptions options{root, true, {}};
  options.poll_interval = std::chrono::milliseconds(20);
  Result<std::unique_ptr<Server>> created = Server::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;
  EXPECT_EQ(s.model_ready("added").status().code(), StatusCode::kNotFound);
  testing::add_model(root, "added", "backend = \"echo\"\n");
  EXPECT_TRUE(eventually([&] { return s.model_ready("added").value_or(false); }));

  // A new version folder with version_policy "all" is picked up.
  fs::create_directories(root / "added" / "2");
  std::ofstream(root / "added" / "config.toml") << "backend = \"echo\"\nversion_policy = \"all\"\n";
  EXPECT_TRUE(eventually([&] {
    Result<ModelMetadata> md = s.model_metadata("added");
    return md.ok() && md->versions.size() == 2;
  }));

  // A config broken while serving leaves the loaded versions serving and says why.
  std::ofstream(root / "added" / "config.toml") << "backend = \"echo\"\nbatch = 2\n";
  EXPECT_TRUE(eventually([&] { return !s.ready(); }));
  EXPECT_TRUE(s.model_ready("added").value_or(false));

  fs::remove_all(root / "added");
  EXPECT_TRUE(
      eventually([&] { return s.model_ready("added").status().code() == StatusCode::kNotFound; }));
  EXPECT_TRUE(s.ready());
  s.shutdown();
  fs::remove_all(root);
}

// issue 28 defect 4: loads read only inside the repository. Absolute paths and ".." are refused
// before the file system is looked at (existing or not, the same answer: nothing to probe with),
// and a model folder or model file that is a symlink to outside is refused once resolved.
TEST(ServerConfinement, LoadsStayInsideTheRepository) {
  const fs::path root = testing::make_test_repository("confined");
  fs::remove_all(root / "broken");
  const fs::path outside = root.string() + "_outside";
  fs::remove_all(outside);
  testing::add_model(outside, "evil", "platform = \"onnx_onnxv1\"\n");
  fs::copy_file(testing::tiny_cnn_path(), outside / "evil" / "1" / "model.onnx");
  fs::create_directory_symlink(outside / "evil", root / "evil");  // a model folder link
  testing::add_model(root, "linked", "platform = \"onnx_onnxv1\"\n");
  fs::create_symlink(outside / "evil" / "1" / "model.onnx", root / "linked" / "1" / "model.onnx");
  testing::add_model(root, "inner", "platform = \"onnx_onnxv1\"\n");  // a link that stays inside
  fs::create_symlink(root / "mnist" / "1" / "model.onnx", root / "inner" / "1" / "model.onnx");

  ServerOptions options{root, false, {"echo"}};
  Result<std::unique_ptr<Server>> created = Server::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Server& s = **created;
  auto worker = [&](const std::string& model) {
    Parameters p;
    p.set("model", model);
    return s.load_worker("compiler", p).status();
  };
  for (const std::string& path :
       {(outside / "evil" / "1" / "model.onnx").string(), std::string("/nonexistent/x.onnx"),
        std::string("../") + outside.filename().string() + "/evil/1/model.onnx",
        std::string("mnist/../../x.onnx"), std::string("/etc/passwd")}) {
    Status st = worker(path);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << path << ": " << st.to_string();
    EXPECT_NE(st.message().find("must be a relative path inside the model repository"),
              std::string::npos)
        << st.message();
  }
  Status folder = s.load_model("evil");
  EXPECT_EQ(folder.code(), StatusCode::kPermissionDenied) << folder.to_string();
  EXPECT_NE(folder.message().find("outside the model repository"), std::string::npos);
  Status file = s.load_model("linked");
  EXPECT_EQ(file.code(), StatusCode::kPermissionDenied) << file.to_string();
  EXPECT_NE(file.message().find("outside the model repository"), std::string::npos);
  Status dots = s.load_model("..");
  EXPECT_EQ(dots.code(), StatusCode::kInvalidArgument) << dots.to_string();
  // Links inside the repository, and relative worker paths, are fine.
  EXPECT_TRUE(s.load_model("inner").ok());
  EXPECT_TRUE(worker("mnist/1/model.onnx").ok());
  // Nothing was written next to the model outside.
  EXPECT_FALSE(fs::exists(outside / "evil" / "1" / ".kiln-cache"));
  s.shutdown();
  fs::remove_all(root);
  fs::remove_all(outside);
}

}  // namespace
}  // namespace kiln::server
