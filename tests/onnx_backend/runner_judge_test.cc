// SPDX-License-Identifier: Apache-2.0
// The ONNX backend runner with its float64 judge, end to end: two bf16 Attention cases whose
// expected output is replaced by float64 rounded once, so that ref (which rounds each step, as the
// original data does) misses it; one is within one ulp of float64, the other is not.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/targets/target.h"
#include "core/mapped_file.h"
#include "tests/onnx_backend/f64_judge.h"

namespace kiln::onnx_backend {
namespace {

namespace fs = std::filesystem;
using compiler::Argument;

struct RunnerRun {
  int exit_code = -1;
  std::string output;
};

RunnerRun run_runner(const std::string& args) {
  const std::string command =
      fmt::format("{}/tests/onnx_backend/onnx_backend_runner {} 2>&1", KILN_BINARY_DIR, args);
  RunnerRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Tensor read_tensor(const fs::path& path) {
  Result<std::string> bytes = read_file(path.string());
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  onnx::TensorProto proto;
  EXPECT_TRUE(bytes.ok() && proto.ParseFromString(*bytes)) << path;
  Result<Tensor> t = compiler::tensor_from_proto(proto, "", path.filename().string());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

class RunnerJudge : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("kiln_runner_judge_{}", ::getpid());
    fs::remove_all(root_);
    auto ref = compiler::make_target("ref");
    ASSERT_TRUE(ref.ok());
    for (const char* name :
         {"test_attention_3d_causal_bf16_expanded", "test_attention_4d_causal_bf16_expanded"}) {
      const fs::path from =
          fs::path(KILN_BINARY_DIR) / "tests/onnx_backend/onnx-node-tests-1.23/node" / name;
      const fs::path to = root_ / "node" / name;
      fs::create_directories(to / "test_data_set_0");
      fs::copy_file(from / "model.onnx", to / "model.onnx");
      std::vector<Argument> inputs;
      for (int i = 0; i < 3; ++i) {
        const std::string input = fmt::format("test_data_set_0/input_{}.pb", i);
        fs::copy_file(from / input, to / input);
        inputs.emplace_back(read_tensor(from / input));
      }
      Result<std::vector<Argument>> f64 =
          float64_reference((from / "model.onnx").string(), **ref, std::move(inputs));
      ASSERT_TRUE(f64.ok()) << f64.status().to_string();
      const Tensor& wide = (*f64)[0].tensor();
      Tensor rounded(DType::kBF16, wide.shape());
      for (int64_t i = 0; i < wide.numel(); ++i) {
        rounded.data<BFloat16>()[i] = BFloat16(static_cast<float>(wide.data<double>()[i]));
      }
      onnx::TensorProto proto;
      compiler::tensor_to_proto(rounded, &proto);
      proto.set_name("Y");
      std::ofstream(to / "test_data_set_0/output_0.pb", std::ios::binary)
          << proto.SerializeAsString();
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string args(const std::string& more) const {
    return fmt::format("--data {} --kinds node --target ref --threads 1 {}", root_.string(), more);
  }

  fs::path root_;
};

TEST_F(RunnerJudge, PassesWithinOneUlpOfFloat64AndSaysSo) {
  const fs::path expected = root_ / "expected.txt";
  std::ofstream(expected) << "test_attention_4d_causal_bf16_expanded  farther from float64\n";
  RunnerRun r = run_runner(args("-v --expected " + expected.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // ref rounds each step as the original data does: 0.847 ulp from float64 (the suite's figure).
  EXPECT_NE(r.output.find("PASSED AGAINST FLOAT64 test_attention_3d_causal_bf16_expanded: "
                          "test_data_set_0: output 0 (\"Y\"): data off by 0."),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("pass test_attention_3d_causal_bf16_expanded: passed against float64: "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("target by 0.847 ulp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fail test_attention_4d_causal_bf16_expanded: test_data_set_0: output 0 "
                          "(\"Y\"): element"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("against float64: element"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the target is neither within one ulp of float64 nor as close as the "
                          "data"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("onnx_backend[ref]: 1 passed (1 against float64), 1 failed, 0 not as "
                          "expected"),
            std::string::npos)
      << r.output;
}

TEST_F(RunnerJudge, AnExpectedFailureThatPassesAgainstFloat64IsAnUnexpectedPass) {
  const fs::path expected = root_ / "expected.txt";
  std::ofstream(expected) << "test_attention_3d_causal_bf16_expanded  one ulp apart\n"
                          << "test_attention_4d_causal_bf16_expanded  farther from float64\n";
  RunnerRun r = run_runner(args("--expected " + expected.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("UNEXPECTED PASS test_attention_3d_causal_bf16_expanded (against "
                          "float64: test_data_set_0"),
            std::string::npos)
      << r.output;
}

TEST_F(RunnerJudge, WithoutTheJudgeBothFail) {
  RunnerRun r = run_runner(args("--no-judge-f64"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnx_backend[ref]: 0 passed (0 against float64: judge off), 2 failed"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::onnx_backend
