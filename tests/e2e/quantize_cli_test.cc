// SPDX-License-Identifier: Apache-2.0
// `kiln compile/run/verify --fp16/--bf16/--int8` on the trained digit classifier with its real
// held-out digits written as .npy files: artifacts keep the scales, verify reports agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/npy.h"
#include "tests/e2e/run_kiln.h"

namespace fs = std::filesystem;

namespace kiln {
namespace {

const std::string kSource = KILN_SOURCE_DIR;
const std::string kModel = kSource + "/examples/repository/digits/1/model.onnx";
const std::string kImages = kSource + "/examples/digit_images";

// A digit image (PGM, grey levels 0..16) as the model's [1, 1, 8, 8] input (level / 16).
Tensor digit(const fs::path& pgm) {
  auto bytes = read_file(pgm.string());
  EXPECT_TRUE(bytes.ok()) << pgm;
  Tensor t(DType::kF32, Shape{1, 1, 8, 8});
  const std::string pixels = bytes.ok() ? bytes->substr(bytes->size() - 64) : std::string(64, 0);
  for (int i = 0; i < 64; ++i) t.data<float>()[i] = static_cast<uint8_t>(pixels[i]) / 16.0f;
  return t;
}

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_quantize_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "calibration");
    fs::create_directories(dir_ / "test");
    // Each held-out digit as test/<image name>.npy (so labels.txt matches by name), and the same
    // digits in calibration batches of 4.
    std::vector<fs::path> images;
    for (const auto& e : fs::directory_iterator(kImages)) {
      if (e.path().extension() == ".pgm") images.push_back(e.path());
    }
    std::sort(images.begin(), images.end());
    ASSERT_EQ(images.size(), 16u);
    Tensor batch(DType::kF32, Shape{4, 1, 8, 8});
    for (size_t i = 0; i < images.size(); ++i) {
      Tensor t = digit(images[i]);
      ASSERT_TRUE(
          write_npy((dir_ / "test" / (images[i].stem().string() + ".npy")).string(), t.view())
              .ok());
      std::copy_n(t.data<float>(), 64, batch.data<float>() + (i % 4) * 64);
      if (i % 4 == 3) {
        const std::string name = "cal_" + std::to_string(i / 4) + ".npy";
        ASSERT_TRUE(write_npy((dir_ / "calibration" / name).string(), batch.view()).ok());
      }
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(QuantizeCli, Int8ArtifactKeepsItsScalesAndRuns) {
  KilnRun c =
      run_kiln("compile " + kModel + " --int8 --calibration " + path("calibration") +
               " --calibration-method percentile --percentile 99.9 -o " + path("digits_int8.kiln"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("calibrating (percentile) [==============================] 4/4"),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("in int8 (percentile)"), std::string::npos) << c.output;
  KilnRun p = run_kiln("print " + path("digits_int8.kiln"));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  // On cpu the convolutions are integer ops holding their int8 weights; the Gemms, whose outputs
  // are not quantized, hold their weights dequantized once at compile time.
  for (const char* expected :
       {"# calibration-method: percentile", "--percentile 99.9", "i8[16,8,3,3]", "= QLinearConv[",
        "%2.weight_quantized", "u8[batch,1,8,8] = QuantizeLinear", "_DequantizeLinear_folded"}) {
    EXPECT_NE(p.output.find(expected), std::string::npos) << expected << "\n" << p.output;
  }
  KilnRun r =
      run_kiln("run " + path("digits_int8.kiln") + " --input image=" + path("test/03_label3.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("logits: f32[1,10]"), std::string::npos) << r.output;
}

// --int8-exclude keeps the nodes or op kinds named in float; the rest is still quantized where an
// int8 op reads it.
TEST_F(QuantizeCli, Int8ExcludeKeepsNamedOpsInFloat) {
  KilnRun c = run_kiln("compile " + kModel + " --int8 --calibration " + path("calibration") +
                       " --int8-exclude Gemm,/4/MaxPool -o " + path("digits_part.kiln"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  KilnRun p = run_kiln("print " + path("digits_part.kiln"));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("--int8-exclude Gemm"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("QLinearConv"), std::string::npos) << p.output;  // /0/Conv
  // /2/Conv reads int8 but writes f32 (the MaxPool after it stays in float): its weights are
  // dequantized once, at compile time.
  EXPECT_NE(p.output.find("%2.weight_DequantizeLinear_folded: f32[16,8,3,3]"), std::string::npos)
      << p.output;
  EXPECT_EQ(p.output.find("i8[32,256]"), std::string::npos) << p.output;  // the Gemms' weights
  EXPECT_EQ(p.output.find("MaxPool_output_0_QuantizeLinear"), std::string::npos) << p.output;
}

TEST_F(QuantizeCli, VerifyReportsAgreementAndAccuracyAsJson) {
  KilnRun v = run_kiln("verify " + kModel + " --target ref --int8 --calibration " +
                       path("calibration") + " --inputs " + path("test") + " --labels " + kImages +
                       "/labels.txt --json --min-top1 90");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  for (const char* expected : {"\"precision\": \"int8 (max)\"", "\"name\": \"logits\"",
                               "\"rows\": 16", "\"labeled\": 16", "\"pass\": true"}) {
    EXPECT_NE(v.output.find(expected), std::string::npos) << expected << "\n" << v.output;
  }
}

// --per-layer keeps each int8 layer in float in turn, on the one calibration, and ranks them.
TEST_F(QuantizeCli, VerifyPerLayerRanksEveryInt8LayerOnOneCalibration) {
  KilnRun v = run_kiln("verify " + kModel + " --target ref --int8 --calibration " +
                       path("calibration") + " --inputs " + path("test") + " --per-layer");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  size_t calibrations = 0;
  for (size_t at = v.output.find("calibrating ("); at != std::string::npos;
       at = v.output.find("calibrating (", at + 1)) {
    ++calibrations;
  }
  EXPECT_EQ(calibrations, 1u) << v.output;
  EXPECT_NE(v.output.find("per layer [==============================] 4/4"), std::string::npos)
      << v.output;
  // Every quantized layer once, in order of the cosine it gives back.
  std::vector<double> cosines;
  for (const char* layer : {"/0/Conv", "/2/Conv", "/6/Gemm", "/8/Gemm"}) {
    const size_t row = v.output.find(std::string("\n") + layer + " ");
    ASSERT_NE(row, std::string::npos) << layer << "\n" << v.output;
  }
  const size_t table = v.output.find("\nlayer kept in float");  // the table's header
  ASSERT_NE(table, std::string::npos) << v.output;
  std::istringstream rows(v.output.substr(v.output.find('\n', table + 1) + 1));
  std::string name;
  double cosine = 0;
  while (rows >> name >> cosine) {
    cosines.push_back(cosine);
    rows.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  ASSERT_EQ(cosines.size(), 4u) << v.output;
  EXPECT_TRUE(std::is_sorted(cosines.rbegin(), cosines.rend())) << v.output;
  for (double c : cosines) EXPECT_GT(c, 0.999) << v.output;
  KilnRun json =
      run_kiln("verify " + kModel + " --target ref --int8 --calibration " + path("calibration") +
               " --inputs " + path("test") + " --per-layer --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("\"per_layer\": [{\"layer\": \""), std::string::npos) << json.output;
  KilnRun no_int8 =
      run_kiln("verify " + kModel + " --bf16 --inputs " + path("test") + " --per-layer");
  EXPECT_NE(no_int8.exit_code, 0);
  EXPECT_NE(no_int8.output.find("--per-layer ranks int8 layers"), std::string::npos)
      << no_int8.output;
}

TEST_F(QuantizeCli, VerifyBf16PrintsATable) {
  KilnRun v = run_kiln("verify " + kModel + " --target ref --bf16 --inputs " + path("test") +
                       " --labels " + kImages + "/labels.txt --min-cosine 0.999");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("bf16 vs fp32 on target ref, 16 input batches"), std::string::npos)
      << v.output;
  EXPECT_NE(v.output.find("(16/16)"), std::string::npos) << v.output;
  // An impossible limit fails the command.
  KilnRun strict =
      run_kiln("verify " + kModel + " --bf16 --inputs " + path("test") + " --min-cosine 1.5");
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_NE(strict.output.find("BELOW the given limits"), std::string::npos) << strict.output;
}

TEST_F(QuantizeCli, MistakesGetOneClearLine) {
  KilnRun no_data = run_kiln("compile " + kModel + " --int8 -o " + path("x.kiln"));
  EXPECT_NE(no_data.exit_code, 0);
  EXPECT_NE(no_data.output.find("--int8 needs calibration inputs: pass --calibration DIR"),
            std::string::npos)
      << no_data.output;
  fs::create_directories(dir_ / "empty");
  KilnRun empty = run_kiln("compile " + kModel + " --int8 --calibration " + path("empty") + " -o " +
                           path("x.kiln"));
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("holds no inputs"), std::string::npos) << empty.output;
  KilnRun both = run_kiln("compile " + kModel + " --fp16 --bf16 -o " + path("x.kiln"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
  KilnRun bad_op =
      run_kiln("run " + kModel + " --input-shape image=1x1x8x8 --bf16 --quantize-ops Conv,Frob");
  EXPECT_NE(bad_op.exit_code, 0);
  EXPECT_NE(bad_op.output.find("unknown op \"Frob\""), std::string::npos) << bad_op.output;
}

}  // namespace
}  // namespace kiln
