// SPDX-License-Identifier: Apache-2.0
// The pipeline and chain backends on the example repository (digits_pipeline -> digits): many
// concurrent requests of different images, each result checked against the pipeline and the model
// run on that image alone; a bad image fails only its own request; chain config errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "pipeline/json/pipeline_json.h"
#include "server/core/server.h"
#include "server/core/test_repository.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(KILN_SOURCE_DIR) / "examples";

struct Image {
  std::string name;
  std::string bytes;
  int label = -1;  // -1: not a digit (a synthetic photo)
};

// The 16 held-out digit PNGs, then JPEGs of other sizes (the pipeline resizes them to 8x8).
std::vector<Image> test_images() {
  std::vector<Image> out;
  for (int i = 0; i < 16; ++i) {
    for (const auto& e : fs::directory_iterator(kExamples / "digit_images")) {
      std::string f = e.path().filename().string();
      if (f.rfind(fmt::format("{:02d}_label", i), 0) == 0 && e.path().extension() == ".png") {
        out.push_back({f, read_file(e.path().string()).value(), f[8] - '0'});
      }
    }
  }
  // Digits drawn larger (and as RGB), JPEG-encoded: server/backends/testdata.
  for (const auto& e :
       fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "server/backends/testdata")) {
    out.push_back({e.path().filename().string(), read_file(e.path().string()).value(), -1});
  }
  std::sort(out.begin() + 16, out.end(),
            [](const Image& a, const Image& b) { return a.name < b.name; });
  return out;
}

Tensor bytes_tensor(const std::vector<const Image*>& images) {
  Tensor t(DType::kString, Shape{static_cast<int64_t>(images.size())});
  for (size_t i = 0; i < images.size(); ++i) t.data<std::string>()[i] = images[i]->bytes;
  return t;
}

InferenceRequest request(const std::string& model, const std::vector<const Image*>& images,
                         const std::string& id) {
  InferenceRequest r;
  r.model = model;
  r.id = id;
  r.inputs.push_back({"image_bytes", bytes_tensor(images), {}});
  return r;
}

class PipelineChainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / fmt::format("kiln_chain_{}", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    for (const char* m : {"digits", "digits_pipeline", "digits_chain"}) {
      fs::copy(kExamples / "repository" / m, root_ / m, fs::copy_options::recursive);
      fs::remove_all(root_ / m / "1" / ".kiln-cache");
    }
    ServerOptions options;
    options.repository = root_;
    server_ = Server::create(options).value().release();
    images_ = new std::vector<Image>(test_images());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete images_;
    fs::remove_all(root_);
  }

  // The pipeline run on one image alone, outside the server.
  static Tensor pipeline_alone(const Image& image) {
    pipeline::PipelineSpec spec =
        pipeline::load_pipeline_json(
            (kExamples / "repository/digits_pipeline/1/pipeline.json").string())
            .value();
    spec.options.batch_size = 1;
    auto p = pipeline::Pipeline::create(spec.options, spec.ops).value();
    Tensor encoded = Tensor::wrap(DType::kU8, Shape{static_cast<int64_t>(image.bytes.size())},
                                  const_cast<char*>(image.bytes.data()), nullptr);
    EXPECT_TRUE(p->feed({encoded}).ok());
    Result<std::optional<pipeline::Batch>> batch = p->run();
    if (!batch.ok() || !batch->has_value()) {
      ADD_FAILURE() << image.name << ": the pipeline alone returned nothing";
      return Tensor(DType::kF32, Shape{1, 8, 8});
    }
    return (**batch).outputs.at(0).samples.at(0).clone();
  }

  static inline fs::path root_;
  static inline Server* server_ = nullptr;
  static inline std::vector<Image>* images_ = nullptr;
};

TEST_F(PipelineChainTest, MetadataComesFromThePipelineAndTheSteps) {
  ModelMetadata p = server_->model_metadata("digits_pipeline").value();
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_EQ(p.inputs[0].dtype, DType::kString);
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.outputs[0].name, "images");
  EXPECT_EQ(p.outputs[0].shape, (std::vector<int64_t>{-1, 1, 8, 8}));
  ModelMetadata c = server_->model_metadata("digits_chain").value();
  EXPECT_EQ(c.inputs[0].name, "image_bytes");
  ASSERT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.outputs[0].name, "logits");
  EXPECT_EQ(c.outputs[0].shape, (std::vector<int64_t>{-1, 10}));
}

// Every image sent at once (one request each, and some requests of three images): the batcher
// joins them, and each request gets exactly what the pipeline gives for its images alone.
TEST_F(PipelineChainTest, EveryRequestOfABatchGetsItsOwnImages) {
  const std::vector<Image>& images = *images_;
  std::vector<std::vector<const Image*>> groups;
  for (const Image& im : images) groups.push_back({&im});
  for (size_t i = 0; i + 2 < 16; i += 5)
    groups.push_back({&images[i], &images[i + 1], &images[i + 2]});
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<Result<InferenceResponse>>> futures;
    for (size_t g = 0; g < groups.size(); ++g) {
      futures.push_back(server_->infer(request("digits_pipeline", groups[g], std::to_string(g))));
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      Result<InferenceResponse> r = futures[g].get();
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->id, std::to_string(g));
      ASSERT_EQ(r->outputs.size(), 1u);
      const Tensor& out = r->outputs[0].data;
      ASSERT_EQ(out.shape(), Shape({static_cast<int64_t>(groups[g].size()), 1, 8, 8}));
      for (size_t k = 0; k < groups[g].size(); ++k) {
        Tensor alone = pipeline_alone(*groups[g][k]);
        const float* got = out.data<float>() + k * 64;
        for (int i = 0; i < 64; ++i) {
          ASSERT_EQ(got[i], alone.data<float>()[i]) << groups[g][k]->name << " element " << i;
        }
      }
    }
  }
  ModelStatistics s = server_->statistics("digits_pipeline").value()[0];
  EXPECT_LT(s.execution_count, s.inference_count) << "the batcher never joined requests";
}

// The chain equals the pipeline then the model, image by image, and classifies the digits.
TEST_F(PipelineChainTest, ChainEqualsPipelineThenModel) {
  const std::vector<Image>& images = *images_;
  std::vector<std::future<Result<InferenceResponse>>> futures;
  for (const Image& im : images)
    futures.push_back(server_->infer(request("digits_chain", {&im}, im.name)));
  int correct = 0, digits = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    Result<InferenceResponse> r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->id, images[i].name);
    const Tensor& logits = r->outputs[0].data;
    ASSERT_EQ(logits.shape(), Shape({1, 10}));
    InferenceRequest direct;
    direct.model = "digits";
    direct.inputs.push_back({"image", pipeline_alone(images[i]).reshaped(Shape{1, 1, 8, 8}), {}});
    Result<InferenceResponse> d = server_->infer(std::move(direct)).get();
    ASSERT_TRUE(d.ok()) << d.status().message();
    const float* want = d->outputs[0].data.data<float>();
    for (int c = 0; c < 10; ++c) {
      EXPECT_NEAR(logits.data<float>()[c], want[c], 1e-4f) << images[i].name;
    }
    const float* got = logits.data<float>();
    int predicted = static_cast<int>(std::max_element(got, got + 10) - got);
    if (images[i].label >= 0) {
      ++digits;
      correct += predicted == images[i].label;
    }
  }
  EXPECT_EQ(digits, 16);
  EXPECT_GE(correct, 15) << "the trained model classifies the held-out digits";
}

TEST_F(PipelineChainTest, ABadImageFailsOnlyItsOwnRequest) {
  Image bad{"bad", "not an image at all", -1};
  const std::vector<Image>& images = *images_;
  std::vector<std::future<Result<InferenceResponse>>> futures;
  for (int i = 0; i < 8; ++i) {
    const Image* im = i == 3 ? &bad : &images[static_cast<size_t>(i)];
    futures.push_back(server_->infer(request("digits_chain", {im}, std::to_string(i))));
  }
  for (int i = 0; i < 8; ++i) {
    Result<InferenceResponse> r = futures[static_cast<size_t>(i)].get();
    if (i == 3) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("not a JPEG or PNG"), std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find("chain step 0"), std::string::npos);
    } else {
      ASSERT_TRUE(r.ok()) << r.status().message();
      const float* got = r->outputs[0].data.data<float>();
      EXPECT_EQ(std::max_element(got, got + 10) - got, images[static_cast<size_t>(i)].label);
    }
  }
}

// issue 28: a truncated or corrupt image is the client's error (400 over HTTP), not the server's.
TEST_F(PipelineChainTest, ATruncatedImageIsInvalidArgumentNotInternal) {
  const Image& png = (*images_)[0];
  const Image& jpeg = images_->back();
  ASSERT_EQ(fs::path(jpeg.name).extension(), ".jpg");
  const Image truncated[] = {{"trunc.png", png.bytes.substr(0, png.bytes.size() / 2), -1},
                             {"trunc.jpg", jpeg.bytes.substr(0, jpeg.bytes.size() / 2), -1}};
  for (const Image& bad : truncated) {
    for (const char* model : {"digits_pipeline", "digits_chain"}) {
      Result<InferenceResponse> r = server_->infer(request(model, {&bad}, bad.name)).get();
      ASSERT_FALSE(r.ok()) << model << " " << bad.name;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument)
          << model << " " << bad.name << ": " << r.status().message();
      EXPECT_NE(r.status().message().find("corrupt or truncated"), std::string::npos)
          << r.status().message();
    }
  }
}

TEST_F(PipelineChainTest, ATimeoutCoversQueueAndCompute) {
  InferenceRequest r = request("digits_chain", {&(*images_)[0]}, "late");
  r.parameters.set("timeout", int64_t{1});
  Result<InferenceResponse> out = server_->infer(std::move(r)).get();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded) << out.status().message();
}

TEST(ChainConfig, StepsAreCheckedAtLoad) {
  fs::path root = testing::make_test_repository("chaincfg");
  testing::add_model(root, "missing_step",
                     "backend = \"chain\"\n[[steps]]\nmodel = \"nope\"\n"
                     "input_map = { x = \"x\" }\noutput_map = { x = \"y\" }\n");
  testing::add_model(root, "unmapped",
                     "backend = \"chain\"\n[[steps]]\nmodel = \"mnist\"\n"
                     "input_map = { wrong = \"x\" }\noutput_map = { probabilities = \"y\" }\n");
  testing::add_model(root, "echo_chain",
                     "backend = \"chain\"\n[[steps]]\nmodel = \"echo\"\n"
                     "input_map = { a = \"in\" }\noutput_map = { a = \"mid\" }\n"
                     "[[steps]]\nmodel = \"echo\"\ninput_map = { b = \"mid\" }\n"
                     "output_map = { b = \"out\" }\n");
  ServerOptions options;
  options.repository = root;
  auto server = Server::create(options).value();
  std::string reasons;
  for (const RepositoryEntry& e : server->repository_index()) {
    if (e.name == "missing_step" || e.name == "unmapped") reasons += e.reason + "\n";
  }
  EXPECT_NE(reasons.find("model \"nope\" does not exist"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("is not in input_map"), std::string::npos) << reasons;
  // Two echo steps: "in" -> "mid" -> "out".
  InferenceRequest r;
  r.model = "echo_chain";
  r.inputs.push_back({"in", Tensor::from_vector<int32_t>({1, 2, 3}), {}});
  Result<InferenceResponse> out = server->infer(std::move(r)).get();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->outputs.size(), 1u);
  EXPECT_EQ(out->outputs[0].name, "out");
  EXPECT_TRUE(out->outputs[0].data.equals(Tensor::from_vector<int32_t>({1, 2, 3})));
  server.reset();
  fs::remove_all(root);
}

TEST(ChainConfig, LoadingOnlyAChainLoadsTheModelsOfItsStepsFirst) {
  // `kiln loadgen --protocol native --model CHAIN` starts a server that loads just that model.
  fs::path root = testing::make_test_repository("chainonly");
  testing::add_model(root, "echo_chain",
                     "backend = \"chain\"\n[[steps]]\nmodel = \"echo\"\n"
                     "input_map = { a = \"in\" }\noutput_map = { a = \"out\" }\n");
  // "a_outer" sorts before the chain it calls: loading follows the steps, not the names.
  testing::add_model(root, "a_outer",
                     "backend = \"chain\"\n[[steps]]\nmodel = \"echo_chain\"\n"
                     "input_map = { in = \"x\" }\noutput_map = { out = \"y\" }\n");
  ServerOptions options;
  options.repository = root;
  options.load_all = false;
  options.load_models = {"a_outer"};
  auto server = Server::create(options).value();
  auto ready = [&](const std::string& name) {
    Result<bool> r = server->model_ready(name);
    return r.ok() && *r;
  };
  EXPECT_TRUE(ready("a_outer"));
  EXPECT_TRUE(ready("echo_chain"));
  EXPECT_TRUE(ready("echo"));
  EXPECT_FALSE(ready("mnist"));  // not a step: left unloaded
  InferenceRequest r;
  r.model = "a_outer";
  r.inputs.push_back({"x", Tensor::from_vector<int32_t>({4, 5}), {}});
  Result<InferenceResponse> out = server->infer(std::move(r)).get();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(out->outputs[0].data.equals(Tensor::from_vector<int32_t>({4, 5})));
  server.reset();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server

namespace kiln::server {
namespace {

// amdinfer's rocAL worker config: backend "rocal", a rocAL-format JSON, batch and color_format.
TEST(RocalBackend, ServesRocalJsonWithItsParameters) {
  fs::path root = fs::temp_directory_path() / fmt::format("kiln_rocal_{}", ::getpid());
  fs::remove_all(root);
  testing::add_model(root, "rocal",
                     "backend = \"rocal\"\n[parameters]\nbatch = 4\ncolor_format = \"U8\"\n");
  std::ofstream(root / "rocal" / "1" / "model.json")
      << R"({"pipeline": [{"operation": "Resize", "dest_width": 16, "dest_height": 12},
           {"operation": "CropMirrorNormalize", "crop_width": 8, "crop_height": 8,
            "start_x": 0.5, "start_y": 0.5, "mean": [128], "std_dev": [64],
            "is_output": true}]})";
  ServerOptions options;
  options.repository = root;
  auto server = Server::create(options).value();
  ModelMetadata md = server->model_metadata("rocal").value();
  ASSERT_EQ(md.outputs.size(), 1u);
  EXPECT_EQ(md.outputs[0].dtype, DType::kF32);
  EXPECT_EQ(md.outputs[0].shape, (std::vector<int64_t>{-1, 8, 8, 1}));  // HWC, grey
  std::vector<Image> images = test_images();
  std::vector<std::future<Result<InferenceResponse>>> futures;
  for (size_t i = 0; i < 6; ++i) {
    InferenceRequest r;
    r.model = "rocal";
    r.inputs.push_back({"image", bytes_tensor({&images[16 + i % 4]}), {}});
    futures.push_back(server->infer(std::move(r)));
  }
  std::vector<Tensor> outs;
  for (auto& f : futures) {
    Result<InferenceResponse> r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->outputs[0].data.shape(), Shape({1, 8, 8, 1}));
    outs.push_back(r->outputs[0].data);
  }
  EXPECT_TRUE(outs[0].equals(outs[4]));  // the same image at another place in the batches
  EXPECT_FALSE(outs[0].equals(outs[1]));
  EXPECT_EQ(server->model_config("rocal")->batching.max_batch_size, 4);
  server.reset();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server
