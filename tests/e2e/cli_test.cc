// SPDX-License-Identifier: Apache-2.0
// The `kiln` CLI as a new user meets it: the bundled example runs, and every bad model or bad
// input gets one clear error line and a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/npy.h"
#include "tests/e2e/run_kiln.h"

namespace fs = std::filesystem;

namespace kiln {
namespace {

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }

  const std::string model_ = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  const std::string digit_ = std::string(KILN_SOURCE_DIR) + "/examples/models/digit.npy";
  fs::path dir_;
};

TEST_F(Cli, VersionAndHelpListSubcommands) {
  KilnRun v = run_kiln("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.output.rfind("kiln ", 0), 0u) << v.output;
  KilnRun h = run_kiln("--help");
  EXPECT_EQ(h.exit_code, 0);
  for (const char* sub : {"run", "verify", "print", "ops", "env"}) {
    EXPECT_NE(h.output.find(sub), std::string::npos) << sub << "\n" << h.output;
  }
}

TEST_F(Cli, RunsTheBundledExampleAndWritesOutputs) {
  KilnRun r = run_kiln("run " + model_ + " --input image=" + digit_ + " --output-dir " +
                       (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("probabilities: f32[1,10]"), std::string::npos) << r.output;
  auto json = read_file((dir_ / "out" / "outputs.json").string());
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"name\": \"probabilities\", \"file\": \"probabilities.npy\", \"dtype\": "
                       "\"f32\", \"shape\": [1, 10]"),
            std::string::npos)
      << *json;
  auto probs = read_npy((dir_ / "out" / "probabilities.npy").string());
  ASSERT_TRUE(probs.ok()) << probs.status().to_string();
  ASSERT_EQ(probs->shape(), (Shape{1, 10}));
  double sum = 0;
  for (float p : probs->span<float>()) {
    EXPECT_GE(p, 0.0f);
    sum += p;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// An int8 compile goes through the compile cache too: its key holds a hash of the calibration
// data, so the same folder loads the cached artifact and a changed file compiles again.
TEST_F(Cli, Int8CompilesAreCachedByTheirCalibrationData) {
  const fs::path calibration = dir_ / "calibration";
  fs::create_directories(calibration);
  fs::copy_file(digit_, calibration / "a.npy");
  fs::copy_file(digit_, calibration / "b.npy");
  const char* old = std::getenv("KILN_CACHE_DIR");
  const std::string saved = old == nullptr ? "" : old;
  ::setenv("KILN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  const std::string args = "run " + model_ + " --input image=" + digit_ + " --int8 --calibration " +
                           calibration.string();
  KilnRun first = run_kiln(args);
  KilnRun second = run_kiln(args);
  // One calibration file changed (the digit shifted by one pixel).
  Result<Tensor> digit = read_npy(digit_);
  ASSERT_TRUE(digit.ok());
  std::rotate(digit->data<float>(), digit->data<float>() + 1,
              digit->data<float>() + digit->numel());
  ASSERT_TRUE(write_npy((calibration / "b.npy").string(), digit->view()).ok());
  KilnRun third = run_kiln(args);
  if (old == nullptr) {
    ::unsetenv("KILN_CACHE_DIR");
  } else {
    ::setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  }
  for (const KilnRun* r : {&first, &second, &third}) ASSERT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(first.output.find("compiled in"), std::string::npos) << first.output;
  EXPECT_NE(second.output.find("loaded from the compile cache"), std::string::npos)
      << second.output;
  EXPECT_NE(third.output.find("compiled in"), std::string::npos) << third.output;
  EXPECT_EQ(second.output.find("calibrating"), std::string::npos) << second.output;
  // The cached program computes what the compiled one did.
  auto probabilities = [](const std::string& s) {
    const size_t at = s.find("probabilities:");
    return at == std::string::npos ? std::string() : s.substr(at, s.find('\n', at) - at);
  };
  EXPECT_FALSE(probabilities(first.output).empty()) << first.output;
  EXPECT_EQ(probabilities(first.output), probabilities(second.output));
}

TEST_F(Cli, RandomInputsAreSeeded) {
  KilnRun a = run_kiln("run " + model_ + " --input-shape image=2x1x28x28 --seed 3");
  KilnRun b = run_kiln("run " + model_ + " --input-shape image=2x1x28x28 --seed 3");
  KilnRun c = run_kiln("run " + model_ + " --input-shape image=2x1x28x28 --seed 4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  EXPECT_EQ(first_line(a.output), first_line(b.output));
  EXPECT_NE(first_line(a.output), first_line(c.output));
}

TEST_F(Cli, VerifyAgreesWithRef) {
  KilnRun r = run_kiln("verify " + model_ + " --target ref --input-shape image=3x1x28x28");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all outputs agree"), std::string::npos) << r.output;
}

TEST_F(Cli, TruncatedModelIsOneClearLine) {
  auto bytes = read_file(model_);
  ASSERT_TRUE(bytes.ok());
  std::string path = write("truncated.onnx", bytes->substr(0, bytes->size() / 3));
  KilnRun r = run_kiln("run " + path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("truncated.onnx"), std::string::npos) << r.output;
}

TEST_F(Cli, RandomBytesAreOneClearLine) {
  std::mt19937 rng(99);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  std::string path = write("noise.onnx", noise);
  KilnRun r = run_kiln("run " + path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("noise.onnx"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingModelFileIsNamed) {
  KilnRun r = run_kiln("run " + (dir_ / "nope.onnx").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("nope.onnx"), std::string::npos) << r.output;
}

TEST_F(Cli, UnknownOpIsNamed) {
  auto bytes = read_file(model_);
  ASSERT_TRUE(bytes.ok());
  std::string patched = *bytes;
  size_t at = patched.find("Softmax");
  ASSERT_NE(at, std::string::npos);
  patched.replace(at, 7, "Softmux");  // same length keeps the protobuf valid
  KilnRun r = run_kiln("run " + write("unknown_op.onnx", patched));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("Softmux"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not supported"), std::string::npos) << r.output;
}

TEST_F(Cli, WrongInputNameListsTheRealOnes) {
  KilnRun r = run_kiln("run " + model_ + " --input picture=" + digit_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("picture"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("image"), std::string::npos) << r.output;
}

TEST_F(Cli, WrongInputShapeNamesTheNode) {
  Tensor small(DType::kF32, Shape{1, 1, 5, 5});
  ASSERT_TRUE(write_npy((dir_ / "small.npy").string(), small.view()).ok());
  KilnRun r = run_kiln("run " + model_ + " --input image=" + (dir_ / "small.npy").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("\"fc\""), std::string::npos) << r.output;
}

TEST_F(Cli, WrongInputDtypeSaysWhatToDo) {
  Tensor wide(DType::kF64, Shape{1, 1, 28, 28});
  ASSERT_TRUE(write_npy((dir_ / "wide.npy").string(), wide.view()).ok());
  KilnRun r = run_kiln("run " + model_ + " --input image=" + (dir_ / "wide.npy").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("expects f32 but the file holds f64"), std::string::npos) << r.output;
}

TEST_F(Cli, DynamicInputWithoutShapeSaysHowToGiveOne) {
  KilnRun r = run_kiln("run " + model_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--input-shape image="), std::string::npos) << r.output;
}

TEST_F(Cli, UnknownTargetListsTheKnownOnes) {
  KilnRun r = run_kiln("run " + model_ + " --input image=" + digit_ + " --target tpu");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("unknown target \"tpu\""), std::string::npos) << r.output;
}

TEST_F(Cli, OpsListsOpsWithOpsetRanges) {
  KilnRun r = run_kiln("ops");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Conv"), std::string::npos);
  EXPECT_NE(r.output.find("1-28"), std::string::npos) << r.output;
}

TEST_F(Cli, PrintShowsTheGraphAsTextAndDot) {
  KilnRun t = run_kiln("print " + model_);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("Conv"), std::string::npos);
  EXPECT_NE(t.output.find("# \"conv1\""), std::string::npos) << t.output;
  KilnRun d = run_kiln("print " + model_ + " --optimized --format dot");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(d.output.rfind("digraph", 0), 0u) << d.output;
}

// `kiln compile` then `kiln run` of the artifact gives exactly the outputs of running the ONNX
// model on the same target; verify and print take the artifact too.
TEST_F(Cli, CompiledArtifactRunsLikeTheOnnxModel) {
  for (const std::string target : {"ref", "cpu"}) {
    SCOPED_TRACE(target);
    const std::string kiln = (dir_ / (target + ".kiln")).string();
    // --batch 1 gives the artifact the shapes `kiln run --input` fixes at import, so both run
    // the same kernels.
    KilnRun c = run_kiln("compile " + model_ + " --target " + target + " --batch 1 -o " + kiln);
    if (target == "cpu" && c.output.find("unknown target") != std::string::npos) continue;
    ASSERT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("wrote " + kiln), std::string::npos) << c.output;
    KilnRun a = run_kiln("run " + model_ + " --target " + target + " --input image=" + digit_ +
                         " --output-dir " + (dir_ / (target + "_onnx")).string());
    ASSERT_EQ(a.exit_code, 0) << a.output;
    KilnRun b = run_kiln("run " + kiln + " --input image=" + digit_ + " --output-dir " +
                         (dir_ / (target + "_kiln")).string());
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("target " + target + ": loaded the artifact in"), std::string::npos)
        << b.output;
    auto x = read_file((dir_ / (target + "_onnx") / "probabilities.npy").string());
    auto y = read_file((dir_ / (target + "_kiln") / "probabilities.npy").string());
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(*x, *y);

    KilnRun v = run_kiln("verify " + kiln);
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_NE(v.output.find(target + " vs ref: all outputs agree"), std::string::npos) << v.output;
    KilnRun p = run_kiln("print " + kiln);
    EXPECT_EQ(p.exit_code, 0) << p.output;
    EXPECT_NE(p.output.find("# target: " + target), std::string::npos) << p.output;
    EXPECT_NE(p.output.find("# recompile: kiln compile " + model_ + " --target " + target +
                            " --batch 1 -o " + kiln),
              std::string::npos)
        << p.output;

    KilnRun wrong = run_kiln("run " + kiln + " --target " + (target == "ref" ? "cpu" : "ref"));
    EXPECT_EQ(wrong.exit_code, 1);
    EXPECT_NE(wrong.output.find("was compiled for target " + target), std::string::npos)
        << wrong.output;
    KilnRun wrong_verify =
        run_kiln("verify " + kiln + " --target " + (target == "ref" ? "cpu" : "ref"));
    EXPECT_EQ(wrong_verify.exit_code, 1);
    EXPECT_NE(wrong_verify.output.find("it cannot be verified on --target"), std::string::npos)
        << wrong_verify.output;
  }
}

// Without --batch or --input-shape the batch dim stays symbolic: the artifact runs at any batch.
TEST_F(Cli, ArtifactWithADynamicBatchRunsAtTheShapeGiven) {
  const std::string kiln = (dir_ / "dyn.kiln").string();
  ASSERT_EQ(run_kiln("compile " + model_ + " --target ref -o " + kiln).exit_code, 0);
  KilnRun p = run_kiln("print " + kiln);
  EXPECT_NE(p.output.find("%image: f32[batch,1,28,28]"), std::string::npos) << p.output;
  KilnRun r = run_kiln("run " + kiln + " --input-shape image=3x1x28x28");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("probabilities: f32[3,10]"), std::string::npos) << r.output;
  KilnRun none = run_kiln("run " + kiln);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("give its shape with --input-shape image=DIMS"), std::string::npos)
      << none.output;
  KilnRun wrong = run_kiln("run " + kiln + " --input-shape image=3x2x28x28");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.output.find("the model's input is f32[batch,1,28,28], the shape given is "
                              "[3,2,28,28]"),
            std::string::npos)
      << wrong.output;
}

TEST_F(Cli, CorruptArtifactIsOneClearLine) {
  const std::string kiln = (dir_ / "m.kiln").string();
  ASSERT_EQ(run_kiln("compile " + model_ + " --target ref -o " + kiln).exit_code, 0);
  auto bytes = read_file(kiln);
  ASSERT_TRUE(bytes.ok());
  const std::string cut = write("cut.kiln", bytes->substr(0, bytes->size() - 100));
  KilnRun r = run_kiln("run " + cut);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find(cut + " is truncated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recompile it with: kiln compile " + model_ + " --target ref -o " + kiln),
            std::string::npos)
      << r.output;

  std::string flipped = *bytes;
  flipped[flipped.size() - 200] ^= 4;
  KilnRun f = run_kiln("run " + write("flipped.kiln", flipped));
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_EQ(count_lines(f.output), 1) << f.output;
  EXPECT_NE(f.output.find("is corrupt (checksum mismatch)"), std::string::npos) << f.output;
}

TEST_F(Cli, CompileOfABadModelOrOptionSaysWhatToDo) {
  KilnRun missing =
      run_kiln("compile " + (dir_ / "nope.onnx").string() + " -o " + (dir_ / "x.kiln").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("nope.onnx"), std::string::npos) << missing.output;
  KilnRun no_output = run_kiln("compile " + model_);
  EXPECT_NE(no_output.exit_code, 0);
  EXPECT_NE(no_output.output.find("--output"), std::string::npos) << no_output.output;
  const std::string kiln = (dir_ / "m.kiln").string();
  ASSERT_EQ(run_kiln("compile " + model_ + " --target ref -o " + kiln).exit_code, 0);
  KilnRun again = run_kiln("compile " + kiln + " -o " + (dir_ / "x.kiln").string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find(kiln + " is already a compiled artifact"), std::string::npos)
      << again.output;
  KilnRun folder = run_kiln("compile " + model_ + " -o " + (dir_ / "no" / "x.kiln").string());
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_NE(folder.output.find("the folder \"" + (dir_ / "no").string() + "\" does not exist"),
            std::string::npos)
      << folder.output;
  KilnRun target = run_kiln("compile " + model_ + " --target tpu -o " + (dir_ / "x.kiln").string());
  EXPECT_EQ(target.exit_code, 1);
  EXPECT_NE(target.output.find("unknown target \"tpu\""), std::string::npos) << target.output;
}

// `kiln perf` on the cpu target (skipped in builds without it, where the target is unknown).
TEST_F(Cli, PerfReportsLatencyAndTimePerKind) {
  KilnRun r = run_kiln("perf " + model_ + " --target cpu --batch 4 --iterations 3 --warmup 1");
  if (r.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want : {"batch 4", "latency median", "throughput", "time by kind", "Conv+Relu",
                           "slowest", "Gemm \"", "peak RSS"}) {
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  }
}

// An artifact compiled with --batch 3 runs 3 samples a run: perf reports that batch without
// being told, and its throughput counts samples.
TEST_F(Cli, PerfOfAnArtifactReportsTheBatchItWasCompiledFor) {
  const std::string kiln = (dir_ / "b3.kiln").string();
  KilnRun c = run_kiln("compile " + model_ + " --target cpu --batch 3 -o " + kiln);
  if (c.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(c.exit_code, 0) << c.output;
  KilnRun r = run_kiln("perf " + kiln + " --iterations 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"batch\":3"), std::string::npos) << r.output;
}

TEST_F(Cli, PerfJsonIsOneLineWithEveryFigure) {
  KilnRun r = run_kiln("perf " + model_ + " --target cpu --batch 2 --iterations 4 --json");
  if (r.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_EQ(r.output.rfind("{\"runtime\":\"kiln\"", 0), 0u) << r.output;
  for (const char* key :
       {"\"batch\":2", "\"iterations\":4", "\"median_ms\":", "\"p90_ms\":", "\"throughput_per_s\":",
        "\"peak_rss_bytes\":", "\"kinds\":[{", "\"steps\":[{\"node\":"}) {
    EXPECT_NE(r.output.find(key), std::string::npos) << key << "\n" << r.output;
  }
  // Four timed runs.
  const size_t times = r.output.find("\"times_ms\":[");
  ASSERT_NE(times, std::string::npos);
  const std::string list = r.output.substr(times, r.output.find(']', times) - times);
  EXPECT_EQ(std::count(list.begin(), list.end(), ','), 3) << list;
}

// Each step's minimum over the profiled runs is at most its median; --profile-runs 0 skips them.
TEST_F(Cli, PerfStepMinimumsAndProfileRuns) {
  KilnRun r =
      run_kiln("perf " + model_ + " --target cpu --batch 1 --iterations 2 --profile-runs 4 --json");
  if (r.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex pair("\"ms\":([0-9.]+),\"min_ms\":([0-9.]+)");
  int pairs = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), pair);
       it != std::sregex_iterator(); ++it) {
    ++pairs;
    EXPECT_LE(std::stod((*it)[2]), std::stod((*it)[1])) << it->str();
    EXPECT_GT(std::stod((*it)[2]), 0.0) << it->str();
  }
  EXPECT_GE(pairs, 4) << "kinds and steps with a median and a minimum\n" << r.output;
  KilnRun none =
      run_kiln("perf " + model_ + " --target cpu --batch 1 --iterations 2 --profile-runs 0");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("latency median"), std::string::npos) << none.output;
  EXPECT_EQ(none.output.find("time by kind"), std::string::npos) << none.output;
}

// --ab compiles a second executable with an environment variable set and times the two in
// alternation; a malformed setting, --json and an artifact are refused with what to do.
TEST_F(Cli, PerfAbTimesBothExecutablesAlternately) {
  KilnRun r = run_kiln("perf " + model_ +
                       " --target cpu --batch 1 --iterations 6 --profile-runs 0 "
                       "--ab KILN_CPU_CONV1X1=onednn");
  if (r.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(
      "--ab KILN_CPU_CONV1X1=onednn: median ([0-9.]+) ms as is, ([0-9.]+) ms with it; per-pair "
      "ratio \\(with / as is\\) median ([0-9.]+), p10 ([0-9.]+), p90 ([0-9.]+) over 6 pairs");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.0);
  EXPECT_GT(std::stod(m[2]), 0.0);
  EXPECT_LE(std::stod(m[4]), std::stod(m[3]));
  EXPECT_LE(std::stod(m[3]), std::stod(m[5]));
  // The variable is back as it was: the second compile does not leak into the process.
  KilnRun bad = run_kiln("perf " + model_ + " --target cpu --batch 1 --iterations 2 --ab NOEQUALS");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("is not NAME=VALUE"), std::string::npos) << bad.output;
  KilnRun json = run_kiln(
      "perf " + model_ + " --target cpu --batch 1 --iterations 2 --json --ab KILN_CPU_CONV1X1=own");
  EXPECT_NE(json.exit_code, 0);
  EXPECT_NE(json.output.find("leave out --json"), std::string::npos) << json.output;
  // A bad value of the variable fails the second compile with the variable's own error.
  KilnRun value = run_kiln("perf " + model_ +
                           " --target cpu --batch 1 --iterations 2 --ab KILN_CPU_CONV1X1=fast");
  EXPECT_NE(value.exit_code, 0);
  EXPECT_NE(value.output.find("KILN_CPU_CONV1X1"), std::string::npos) << value.output;
}

// `kiln perf --turns` times as many runs as each line of its input asks for, answers each with
// their times, and reports over all of them when the input ends (bench/cpu_vs_ort's driver).
TEST_F(Cli, PerfTurnsTimeTheRunsEachLineAsksFor) {
  const std::string turns = (dir_ / "turns.txt").string();
  std::ofstream(turns) << "3\n\n2\n";
  KilnRun r = run_kiln("perf " + model_ +
                       " --target cpu --batch 1 --turns --json --profile-runs 0 < " + turns);
  if (r.output.find("unknown target") != std::string::npos) GTEST_SKIP() << "no cpu target";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex turn("\\{\"turn_times_ms\":\\[([0-9.,]+)\\],\"cpu_ms_per_run\":[0-9.]+\\}");
  std::vector<size_t> counts;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), turn);
       it != std::sregex_iterator(); ++it) {
    const std::string times = (*it)[1];
    counts.push_back(static_cast<size_t>(std::count(times.begin(), times.end(), ',')) + 1);
  }
  EXPECT_EQ(counts, (std::vector<size_t>{3, 2})) << r.output;
  EXPECT_NE(r.output.find("\"iterations\":5,"), std::string::npos) << r.output;
  // Anything but a count, or no turn at all, is a clear error.
  std::ofstream(turns) << "2\nten\n";
  KilnRun bad = run_kiln("perf " + model_ + " --target cpu --batch 1 --turns < " + turns);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("\"ten\" on standard input is no count of runs"), std::string::npos)
      << bad.output;
  KilnRun none = run_kiln("perf " + model_ + " --target cpu --batch 1 --turns < /dev/null");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("ended before the first turn"), std::string::npos) << none.output;
}

// `kiln perf` of a .kiln artifact times the loaded executable and reports its load time.
TEST_F(Cli, PerfOfAnArtifactReportsItsLoadTime) {
  using namespace std::string_literals;
  for (const std::string target : {"ref", "cpu"}) {
    SCOPED_TRACE(target);
    const std::string kiln = (dir_ / (target + ".kiln")).string();
    KilnRun c = run_kiln("compile " + model_ + " --target " + target + " --batch 1 -o " + kiln);
    if (target == "cpu" && c.output.find("unknown target") != std::string::npos) continue;
    ASSERT_EQ(c.exit_code, 0) << c.output;
    KilnRun r = run_kiln("perf " + kiln + " --iterations 3 --warmup 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const std::string& want : {"on " + target, "load "s, "first run"s, "latency median"s,
                                    target == "cpu" ? "time by kind"s : "does not time"s}) {
      EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
    }
    KilnRun j = run_kiln("perf " + kiln + " --iterations 2 --threads 1 --json");
    ASSERT_EQ(j.exit_code, 0) << j.output;
    for (const char* key : {"\"load_ms\":", "\"threads\":1", "\"median_ms\":"}) {
      EXPECT_NE(j.output.find(key), std::string::npos) << key << "\n" << j.output;
    }
  }
}

// An artifact compiled without --batch keeps the model's dynamic batch dim: `kiln perf` runs it
// at the --batch asked for (it aborted on the dynamic dim before).
TEST_F(Cli, PerfOfAnArtifactWithADynamicBatchRunsTheBatchAskedFor) {
  const std::string kiln = (dir_ / "dynamic.kiln").string();
  KilnRun c = run_kiln("compile " + model_ + " --target ref -o " + kiln);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  KilnRun r = run_kiln("perf " + kiln + " --batch 3 --iterations 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"batch\":3"), std::string::npos) << r.output;
  // It runs on its own target; another --target is refused with what to do.
  KilnRun other = run_kiln("perf " + kiln + " --target cpu --batch 3 --iterations 2");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("was compiled for target ref; it cannot run on --target cpu"),
            std::string::npos)
      << other.output;
}

TEST_F(Cli, PerfBatchOfAFixedShapeSaysWhatToDo) {
  KilnRun r = run_kiln("perf " + model_ + " --input-shape image=2x1x28x28 --batch 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--batch 4: input \"image\""), std::string::npos) << r.output;
  KilnRun zero = run_kiln("perf " + model_ + " --batch 1 --iterations 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.output.find("--iterations"), std::string::npos) << zero.output;
}

}  // namespace
}  // namespace kiln
