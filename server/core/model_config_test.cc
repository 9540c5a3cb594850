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
  // Found by fuzz_model_config: a float where an integer belongs, past int64's range, reached a
  // conversion in toml++ that UBSan reports as undefined.
  expect_error("backend = \"echo\"\n[dynamic_batching]\nmax_queue_delay_microseconds = 1.2e23\n",
               {"max_queue_delay_microseconds", "must be an integer"});
  expect_error("backend = \"echo\"\ninstances = 2.0\n", {"instances", "must be an integer"});
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

// Found by fuzz_model_config: a non-ASCII character where TOML expects whitespace made toml++ 3.3
// reach __builtin_unreachable (UBSan: "execution reached an unreachable program point").
TEST(ModelConfig, NonAsciiOutsideStringsIsAClearErrorAndInsideThemIsKept) {
  const std::pair<std::string_view, std::string_view> bad[] = {
      {"backend = \"echo\"\nx = [1, \u0322]\n", "m/config.toml:2: "},
      {"\u00e9 = 1\n", "m/config.toml:1: "},
      {"backend = \"echo\" # a comment\n[parameters]\n  \u3000a = 1\n", "m/config.toml:3: "},
      {"name = \"\"\"\nb\\\\\\\ufecf\"\"\"\n", "m/config.toml:2: "},
      {"name = \"a\\ \t\u00e9\"\n", "m/config.toml:1: "},
      {"name = \"a\xff\"\n", "m/config.toml:1: "}};
  // Not TOML, with the non-ASCII character where toml++ looked at it while failing.
  Result<ModelConfig> broken = parse_model_config("me = 422\"(\ufef2\\eo", "m/config.toml");
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument) << broken.status().to_string();
  for (const auto& [text, where] : bad) {
    Result<ModelConfig> c = parse_model_config(text, "m/config.toml");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message(),
              std::string(where) +
                  "a non-ASCII character outside a string or comment, after a backslash, or not "
                  "UTF-8; TOML allows none of these");
  }
  Result<ModelConfig> kept = parse_model_config(
      "# caf\u00e9 \u0322\nbackend = \"echo\" # \u0322\n[parameters]\nlabel = \"caf\u00e9 "
      "\u0322\"\n"
      "note = '''\n\u0322 \"\n'''\nescaped = \"\\\" \u0322\"\n",
      "m/config.toml");
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->parameters.get_string("label").value(), "caf\u00e9 \u0322");
  EXPECT_EQ(kept->parameters.get_string("note").value(), "\u0322 \"\n");
  EXPECT_EQ(kept->parameters.get_string("escaped").value(), "\" \u0322");
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

// Triton's instance_group on GPUs: `count` instances on each listed GPU, the cuda target.
TEST(ModelConfig, InstanceGroupsOnGpusRunCountPerGpu) {
  Result<ModelConfig> c = parse_model_config_pbtxt(
      "name: \"r\"\nplatform: \"onnx_onnxv1\"\nmax_batch_size: 64\n"
      "instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ]\n",
      "r/config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->instances, 2);
  EXPECT_EQ(c->gpus, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(instance_threads(*c), 4);
  EXPECT_EQ(c->parameters.get_string("target")->value(), "cuda");

  Result<ModelConfig> differ = parse_model_config_pbtxt(
      "name: \"r\"\nplatform: \"onnx_onnxv1\"\n"
      "instance_group [ { count: 1 gpus: [ 0 ] }, { count: 1 gpus: [ 1 ] } ]\n",
      "r/config.pbtxt");
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("list the same gpus"), std::string_view::npos)
      << differ.status().to_string();

  Result<ModelConfig> toml =
      parse_model_config("backend = \"compiler\"\ninstances = 3\ngpus = [1, 0]\n", "r/config.toml");
  ASSERT_TRUE(toml.ok()) << toml.status().to_string();
  EXPECT_EQ(toml->gpus, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(instance_threads(*toml), 6);
  Result<ModelConfig> twice =
      parse_model_config("backend = \"compiler\"\ngpus = [0, 0]\n", "r/config.toml");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("lists GPU 0 twice"), std::string_view::npos);
  Result<ModelConfig> negative =
      parse_model_config("backend = \"compiler\"\ngpus = [-1]\n", "r/config.toml");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("at least 0"), std::string_view::npos);
}

TEST(ModelConfig, ReadsTritonConfigPbtxt) {
  Result<ModelConfig> c = parse_model_config_pbtxt(R"(
name: "mnist"
backend: "onnxruntime"
max_batch_size: 8
version_policy: { all: {} }
input [ { name: "image" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
default_model_filename: "model.onnx"
dynamic_batching {
  preferred_batch_size: [ 4 ]
  max_queue_delay_microseconds: 100
  default_queue_policy { max_queue_size: 16 default_timeout_microseconds: 5000 }
}
parameters { key: "pad_batch" value: { string_value: "false" } }
)",
                                                   "mnist/config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->backend, "compiler");
  EXPECT_EQ(c->version_policy, "all");
  EXPECT_EQ(c->instances, 2);
  EXPECT_EQ(c->batching.max_batch_size, 8);
  EXPECT_EQ(c->batching.preferred_batch_size, (std::vector<int64_t>{4}));
  EXPECT_EQ(c->batching.max_queue_delay_microseconds, 100);
  EXPECT_EQ(c->batching.max_queue_size, 16);
  EXPECT_EQ(c->batching.default_timeout_microseconds, 5000);
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));  // batch dim added
  EXPECT_EQ(c->outputs[0].shape, (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(c->parameters.get_string("model")->value(), "model.onnx");
  EXPECT_EQ(c->parameters.get_bool("pad_batch")->value(), false);

  EXPECT_TRUE(c->gpus.empty());
  EXPECT_FALSE(c->parameters.has("target"));  // KIND_CPU: the compiler's default target

  Result<ModelConfig> unknown = parse_model_config_pbtxt(
      "name: \"m\"\nbackend: \"onnxruntime\"\noptimization { priority: PRIORITY_MAX }\n",
      "m/config.pbtxt");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("m/config.pbtxt:3"), std::string_view::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("optimization"), std::string_view::npos);
  Result<ModelConfig> no_type = parse_model_config_pbtxt(
      "backend: \"echo\"\ninput [ { name: \"x\" dims: [ 1 ] } ]\n", "m/config.pbtxt");
  EXPECT_NE(no_type.status().message().find("needs a data_type"), std::string_view::npos);

  // A folder with only config.pbtxt is read through it.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln_pbtxt_" + std::to_string(::getpid())) / "echo";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.pbtxt") << "backend: \"echo\"\nmax_batch_size: 4\n";
  Result<ModelConfig> read = read_model_config(dir);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->name, "echo");
  EXPECT_EQ(read->batching.max_batch_size, 4);
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace kiln::server

namespace kiln::server {
namespace {

TEST(ModelConfig, ChainStepsFromTomlAndFromTritonEnsembles) {
  Result<ModelConfig> toml = parse_model_config(
      "backend = \"chain\"\n[[steps]]\nmodel = \"pre\"\nversion = 2\n"
      "input_map = { bytes = \"in\" }\noutput_map = { images = \"x\" }\n"
      "[[steps]]\nmodel = \"cnn\"\ninput_map = { image = \"x\" }\noutput_map = { logits = \"y\" "
      "}\n",
      "c.toml");
  ASSERT_TRUE(toml.ok()) << toml.status().message();
  ASSERT_EQ(toml->steps.size(), 2u);
  EXPECT_EQ(toml->steps[0].model, "pre");
  EXPECT_EQ(toml->steps[0].version, "2");
  EXPECT_EQ(toml->steps[1].input_map[0], (std::pair<std::string, std::string>{"image", "x"}));
  Result<ModelConfig> pbtxt = parse_model_config_pbtxt(
      "platform: \"ensemble\"\nmax_batch_size: 8\n"
      "ensemble_scheduling { step [ { model_name: \"pre\" model_version: -1 "
      "input_map { key: \"bytes\" value: \"in\" } output_map { key: \"images\" value: \"x\" } },"
      " { model_name: \"cnn\" model_version: 3 input_map { key: \"image\" value: \"x\" } "
      "output_map { key: \"logits\" value: \"y\" } } ] }\n",
      "config.pbtxt");
  ASSERT_TRUE(pbtxt.ok()) << pbtxt.status().message();
  EXPECT_EQ(pbtxt->backend, "chain");
  ASSERT_EQ(pbtxt->steps.size(), 2u);
  EXPECT_EQ(pbtxt->steps[0].version, "");
  EXPECT_EQ(pbtxt->steps[1].version, "3");
  EXPECT_EQ(pbtxt->steps[1].output_map[0], (std::pair<std::string, std::string>{"logits", "y"}));
  Result<ModelConfig> no_steps = parse_model_config("backend = \"chain\"\n", "c.toml");
  ASSERT_FALSE(no_steps.ok());
  EXPECT_NE(no_steps.status().message().find("needs [[steps]]"), std::string::npos);
  Result<ModelConfig> stray =
      parse_model_config("backend = \"echo\"\n[[steps]]\nmodel = \"x\"\n", "c.toml");
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.status().message().find("belong to backend \"chain\""), std::string::npos);
}

}  // namespace
}  // namespace kiln::server
