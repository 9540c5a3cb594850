// SPDX-License-Identifier: Apache-2.0
// Tests JSON pipelines: both forms parse into the right operators and run on real files; every
// kind of bad input is one clear error naming the entry.
#include "pipeline/json/pipeline_json.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::Pattern;

void write_dataset(const testing::TempDir& dir) {
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> pixels = testing::make_pixels(60 + i, 50 + 2 * i, 3, Pattern::kGradient);
    testing::write_bytes(dir.file(fmt::format("a/{}.jpg", i)),
                         testing::encode_jpeg(pixels, 60 + i, 50 + 2 * i, 3));
    testing::write_bytes(dir.file(fmt::format("b/{}.png", i)),
                         testing::encode_png(pixels, 60 + i, 50 + 2 * i, 3));
  }
}

Result<std::vector<Batch>> run_all(PipelineSpec spec, const std::string& root) {
  spec.ops.front().args["file_root"] = root;
  KILN_ASSIGN_OR_RETURN(auto p, Pipeline::create(spec.options, spec.ops));
  std::vector<Batch> batches;
  while (true) {
    KILN_ASSIGN_OR_RETURN(auto batch, p->run());
    if (!batch) break;
    batches.push_back(std::move(*batch));
  }
  return batches;
}

TEST(PipelineJsonTest, RocalFormatRunsAsALinearChain) {
  testing::TempDir dir;
  write_dataset(dir);
  auto spec = parse_pipeline_json(R"({ "pipeline": [
    {"operation": "Resize", "dest_width": 40, "dest_height": 30, "is_output": false},
    {"operation": "CropMirrorNormalize", "crop_depth": 224, "crop_height": 20, "crop_width": 24,
     "start_x": 0, "start_y": 0, "start_z": 0,
     "mean": [0.485, 0.456, 0.406], "std_dev": [0.229, 0.224, 0.225], "is_output": true} ] })",
                                  "resnet.json");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->format, "rocal");
  ASSERT_EQ(spec->ops.size(), 4u);
  EXPECT_EQ(spec->ops[0].op, "readers.file");
  EXPECT_EQ(spec->ops[1].op, "decoders.image");
  EXPECT_EQ(spec->ops[2].op, "resize");
  EXPECT_EQ(spec->ops[3].op, "crop_mirror_normalize");
  EXPECT_EQ(spec->options.outputs, (std::vector<std::string>{"output1", "label"}));
  spec->options.batch_size = 6;
  auto batches = run_all(*spec, dir.path());
  ASSERT_TRUE(batches.ok()) << batches.status().to_string();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_EQ((*batches)[0].outputs[0].dense.shape(), Shape({6, 20, 24, 3}));
  EXPECT_EQ((*batches)[0].outputs[0].dense.dtype(), DType::kF32);
  EXPECT_EQ((*batches)[0].outputs[1].dense.shape(), Shape({6}));
}

TEST(PipelineJsonTest, EveryRocalOperationMapsToKilnOperators) {
  testing::TempDir dir;
  write_dataset(dir);
  const std::vector<std::pair<std::string, Shape>> cases = {
      {R"({"operation": "Resize", "dest_width": 20, "dest_height": 10})", Shape{10, 20, 3}},
      {R"({"operation": "ResizeMirrorNormalize", "dest_width": 20, "dest_height": 10,
           "mean": [1, 2, 3], "std_dev": [2, 2, 2], "mirror": 1})",
       Shape{10, 20, 3}},
      {R"({"operation": "CropResizeFixed", "dest_width": 16, "dest_height": 12, "area": 0.5,
           "aspect_ratio": 1.0, "x_center_drift": 0.1, "y_center_drift": -0.1})",
       Shape{12, 16, 3}},
      {R"({"operation": "CropFixed", "crop_width": 16, "crop_height": 12, "crop_depth": 1,
           "crop_pos_x": 0.0, "crop_pos_y": 1.0, "crop_pos_z": 0})",
       Shape{12, 16, 3}},
      {R"({"operation": "ResizeCropMirrorFixed", "dest_width": 30, "dest_height": 30,
           "crop_h": 20, "crop_w": 10, "mirror": true})",
       Shape{20, 10, 3}},
  };
  for (const auto& [entry, shape] : cases) {
    auto spec = parse_pipeline_json(fmt::format(R"({{"pipeline": [{}]}})", entry), "p.json");
    ASSERT_TRUE(spec.ok()) << entry << ": " << spec.status().to_string();
    spec->options.batch_size = 6;
    auto batches = run_all(*spec, dir.path());
    ASSERT_TRUE(batches.ok()) << entry << ": " << batches.status().to_string();
    EXPECT_EQ((*batches)[0].outputs[0].samples[0].shape(), shape) << entry;
  }
}

TEST(PipelineJsonTest, KilnFormatNamesOperatorsArgsAndPerSampleInputs) {
  testing::TempDir dir;
  write_dataset(dir);
  auto spec = parse_pipeline_json(R"({
    "batch_size": 4, "num_threads": 2, "prefetch_queue_depth": 1, "seed": 7,
    "operators": [
      {"op": "readers.file", "args": {"random_shuffle": true}},
      {"op": "decoders.image_random_crop", "args": {"min_width": 16, "min_height": 16}},
      {"op": "resize", "args": {"resize_x": 16, "resize_y": 16}},
      {"op": "random.coin_flip", "outputs": ["coin"]},
      {"op": "crop_mirror_normalize", "arg_inputs": {"mirror": "coin"},
       "args": {"mean": [120, 115, 100], "std": [60, 60, 60]}}
    ]})",
                                  "kiln.json");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->format, "kiln");
  EXPECT_EQ(spec->options.batch_size, 4);
  EXPECT_EQ(spec->options.seed, 7u);
  // "images" is produced three times; each consumer reads the latest one.
  EXPECT_EQ(spec->ops[2].inputs, (std::vector<std::string>{"images"}));
  EXPECT_EQ(spec->ops[2].outputs, (std::vector<std::string>{"images@1"}));
  EXPECT_EQ(spec->ops[4].inputs, (std::vector<std::string>{"images@1"}));
  EXPECT_EQ(spec->options.outputs, (std::vector<std::string>{"images@2", "label"}));
  auto batches = run_all(*spec, dir.path());
  ASSERT_TRUE(batches.ok()) << batches.status().to_string();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].outputs[0].dense.shape(), Shape({4, 3, 16, 16}));
  EXPECT_EQ((*batches)[1].outputs[0].dense.shape(), Shape({2, 3, 16, 16}));
}

TEST(PipelineJsonTest, ErrorsNameTheEntryAndTheKey) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{\"pipeline\": [\n  {\"operation\": \"Resize\",}\n]}", "invalid JSON at line 2"},
      {"[1, 2]", "expected a JSON object"},
      {R"({"layers": []})", "expected the key \"pipeline\""},
      {R"({"pipeline": []})", "non-empty array"},
      {R"({"pipeline": [{"operation": "Rotate", "angle": 3}]})",
       "entry #0 (Rotate): unknown operation \"Rotate\""},
      {R"({"pipeline": [{"operation": "Resize", "dest_width": 3}]})",
       "entry #0 (Resize): missing the key \"dest_height\""},
      {R"({"pipeline": [{"operation": "Resize", "dest_width": 3, "dest_height": 4},
                        {"operation": "Resize", "dest_width": "3", "dest_height": 4}]})",
       "entry #1 (Resize): \"dest_width\": expected an integer, found a string"},
      {R"({"pipeline": [{"operation": "Resize", "dest_width": 3, "dest_height": 4, "dst": 1}]})",
       "unknown key \"dst\""},
      {R"({"pipeline": [{"operation": "CropMirrorNormalize", "crop_width": 3, "crop_height": 4,
                         "mean": "zero"}]})",
       "\"mean\": expected an array of numbers"},
      {R"({"operators": [{"op": "readers.file"}, {"op": "decoders.jpeg"}]})",
       "operator #1 (decoders.jpeg): unknown operator \"decoders.jpeg\""},
      {R"({"operators": [{"op": "readers.file", "args": {"file_root": "x"}},
                         {"op": "resize", "args": {"resize_x": [1, "a"]}}]})",
       "operator #1 (resize): arg \"resize_x\": expected an array of numbers"},
      {R"({"operators": [{"op": "readers.file"}], "batch_size": "8"})",
       "\"batch_size\": expected an integer, found a string"},
      {R"({"operators": [{"op": "readers.file", "input": []}]})", "unknown key \"input\""},
  };
  for (const Case& c : cases) {
    auto spec = parse_pipeline_json(c.text, "bad.json");
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr("bad.json")) << c.text;
  }
}

TEST(PipelineJsonTest, SchemaErrorsComeFromTheOperatorWhenThePipelineIsCreated) {
  auto spec = parse_pipeline_json(
      R"({"operators": [{"op": "readers.file", "args": {"file_root": "/nonexistent"}},
                        {"op": "decoders.image", "args": {"output_type": 3}}]})",
      "p.json");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto p = Pipeline::create(spec->options, spec->ops);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("output_type"));
}

// The benchmark's pipeline file parses, runs, and gives identical batches on 1 and 3 threads.
TEST(PipelineJsonTest, BenchmarkPipelineIsDeterministicAcrossThreadCounts) {
  testing::TempDir dir;
  for (int i = 0; i < 10; ++i) {
    const int w = 230 + 17 * i, h = 240 + 9 * i;
    std::vector<uint8_t> pixels = testing::make_pixels(w, h, 3, Pattern::kCheckerboard);
    testing::write_bytes(dir.file(fmt::format("c{}/{}.jpg", i % 2, i)),
                         testing::encode_jpeg(pixels, w, h, 3, 80, 2));
  }
  auto spec = load_pipeline_json(std::string(KILN_SOURCE_DIR) +
                                 "/bench/pipeline_vs_torchvision/rrc_flip_normalize.json");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  spec->options.batch_size = 4;
  std::vector<std::vector<Batch>> runs;
  for (int threads : {1, 3}) {
    spec->options.num_threads = threads;
    auto batches = run_all(*spec, dir.path());
    ASSERT_TRUE(batches.ok()) << batches.status().to_string();
    runs.push_back(std::move(*batches));
  }
  ASSERT_EQ(runs[0].size(), 3u);
  ASSERT_EQ(runs[1].size(), 3u);
  for (size_t b = 0; b < runs[0].size(); ++b) {
    EXPECT_EQ(runs[0][b].paths, runs[1][b].paths);
    EXPECT_EQ(runs[0][b].outputs[0].dense.shape()[1], 3);
    EXPECT_EQ(runs[0][b].outputs[0].dense.shape()[2], 224);
    EXPECT_TRUE(runs[0][b].outputs[0].dense.equals(runs[1][b].outputs[0].dense)) << "batch " << b;
    EXPECT_TRUE(runs[0][b].outputs[1].dense.equals(runs[1][b].outputs[1].dense));
  }
}

TEST(PipelineJsonTest, MissingFileIsNamed) {
  auto spec = load_pipeline_json("/nonexistent/pipeline.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("/nonexistent/pipeline.json"));
}

}  // namespace
}  // namespace kiln::pipeline
