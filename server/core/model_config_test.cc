// SPDX-License-Identifier: Apache-2.0
// config.toml parsing: every key, and a clear error naming the file, line and key for bad ones.
#include "server/core/model_config.h"

#include <gtest/gtest.h>

#include <fstream>

namespace kiln::server {
namespace {

TEST(ModelConfig, ParsesEveryKey) {
  Result<ModelConfig> c = parse_model_config(R"(
name = "mnist"
platform = "onnx_onnxv1"
instances = 2
version_policy = "all"
max_batch_size = 8
[dynamic_batching]
preferred_batch_size = [4, 8]
max_queue_delay_microseconds = 100
max_queue_size = 64
default_timeout_microseconds = 5000
[parameters]
batch = 8
pad_batch = false
target = "ref"
scale = 0.5
[[inputs]]
name = "image"
datatype = "FP32"
shape = [-1, 1, 28, 28]
[[outputs]]
name = "probabilities"
datatype = "FP32"
shape = [-1, 10]
)",
                                             "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->name, "mnist");
  EXPECT_EQ(c->backend, "compiler");
  EXPECT_EQ(c->instances, 2);
  EXPECT_EQ(c->version_policy, "all");
  EXPECT_EQ(c->batching.max_batch_size, 8);
  EXPECT_EQ(c->batching.preferred_batch_size, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(c->batching.max_queue_delay_microseconds, 100);
  EXPECT_EQ(c->batching.max_queue_size, 64);
  EXPECT_EQ(c->batching.default_timeout_microseconds, 5000);
  EXPECT_EQ(c->parameters.get_int("batch")->value(), 8);
  EXPECT_EQ(c->parameters.get_bool("pad_batch")->value(), false);
  EXPECT_EQ(c->parameters.get_string("target")->value(), "ref");
  EXPECT_EQ(c->parameters.get_double("scale")->value(), 0.5);
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].dtype, DType::kF32);
  EXPECT_EQ(c->inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_EQ(c->outputs[0].name, "probabilities");
}

void expect_error(const std::string& text, const std::vector<std::string>& parts) {
  Result<ModelConfig> c = parse_model_config(text, "m/config.toml");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& p : parts) {
    EXPECT_NE(c.status().message().find(p), std::string_view::npos)
        << "missing \"" << p << "\" in: " << c.status().message();
  }
}

TEST(ModelConfig, BadConfigsAreClearErrors) {
  expect_error("backend = \"echo\"\nmax_batch = 4\n",
               {"m/config.toml:2", "max_batch", "max_batch_size"});
  expect_error("backend = \"echo\"\n[dynamic_batching]\ndelay = 1\n", {"dynamic_batching.delay"});
  expect_error("backend = \"echo\"\nmax_batch_size = -1\n", {"max_batch_size", "at least 0"});
  expect_error("backend = \"echo\"\nmax_batch_size = \"8\"\n", {"max_batch_size", "integer"});
  expect_error("backend = \"echo\"\n[[inputs]]\nname = \"x\"\ndatatype = \"FLOAT\"\n",
               {"FLOAT", "KServe datatype"});
  expect_error("backend = \"echo\"\n[[inputs]]\nname = \"x\"\n", {"name and a datatype"});
  expect_error("name = \"x\"\n", {"no backend"});
  expect_error("platform = \"tensorflow_graphdef\"\n", {"tensorflow_graphdef", "not served"});
  expect_error(
      "backend = \"echo\"\nmax_batch_size = 4\n[dynamic_batching]\n"
      "preferred_batch_size = [8]\n",
      {"preferred_batch_size 8", "max_batch_size 4"});
  expect_error("backend = \"echo\"\nversion_policy = \"newest\"\n", {"version_policy", "newest"});
  expect_error("backend = \"echo\"\nname = \n", {"m/config.toml:2"});
}

TEST(ModelConfig, ReadChecksTheFileAndTheFolderName) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln_config_" + std::to_string(::getpid())) / "echo";
  std::filesystem::create_directories(dir);
  Result<ModelConfig> missing = read_model_config(dir);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("config.toml"), std::string_view::npos);
  std::ofstream(dir / "config.toml") << "backend = \"echo\"\n";
  Result<ModelConfig> ok = read_model_config(dir);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->name, "echo");
  std::ofstream(dir / "config.toml") << "name = \"other\"\nbackend = \"echo\"\n";
  Result<ModelConfig> mismatch = read_model_config(dir);
  EXPECT_NE(mismatch.status().message().find("folder name"), std::string_view::npos);
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace kiln::server
