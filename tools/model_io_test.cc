// SPDX-License-Identifier: Apache-2.0
// Tests of what `kiln run --output-dir` writes: file names for tensor names of any length or
// characters, and outputs.json with the real names.
#include "tools/model_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/npy.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

TEST(OutputFileName, SafeShortNamesAreKept) {
  EXPECT_EQ(output_file_name("logits"), "logits.npy");
  EXPECT_EQ(output_file_name("conv2d_19"), "conv2d_19.npy");
}

TEST(OutputFileName, OtherNamesGetADistinctHashedName) {
  const std::string a = output_file_name("Identity:0");
  const std::string b = output_file_name("Identity_0");
  EXPECT_EQ(b, "Identity_0.npy");
  EXPECT_EQ(a, "Identity_0-bff31fdc.npy");
  EXPECT_NE(a, b);
  EXPECT_EQ(output_file_name("../../etc/passwd").find('/'), std::string::npos);
}

TEST(WriteOutputs, NamesOfAnyLengthBecomeValidFiles) {
  // tf2onnx names values after the whole TensorFlow scope: 300 characters and more.
  std::string long_name;
  for (int i = 0; i < 30; ++i) long_name += "StatefulPartitionedCall/model/";
  long_name += "conv:0";
  std::string other = long_name;
  other.back() = '1';  // the same first 100 safe characters
  fs::path dir = fs::temp_directory_path() / ("kiln_outputs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<compiler::Argument> outputs;
  outputs.emplace_back(Tensor::scalar<float>(1.5f));
  outputs.emplace_back(Tensor::scalar<float>(-2.0f));
  Status s = write_outputs(dir.string(), {long_name, other}, outputs);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const std::string file_a = output_file_name(long_name);
  const std::string file_b = output_file_name(other);
  EXPECT_NE(file_a, file_b);
  EXPECT_LE(file_a.size(), 120u);
  auto a = read_npy((dir / file_a).string());
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->data<float>()[0], 1.5f);
  auto b = read_npy((dir / file_b).string());
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->data<float>()[0], -2.0f);
  std::ifstream json(dir / "outputs.json");
  std::stringstream text;
  text << json.rdbuf();
  EXPECT_NE(text.str().find("\"name\": \"" + long_name + "\", \"file\": \"" + file_a + "\""),
            std::string::npos)
      << text.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::tools
