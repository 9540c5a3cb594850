// SPDX-License-Identifier: Apache-2.0
// The GPU operators against the CPU ones: the same pipeline run with device "cpu" and "gpu" on
// PNG images of odd sizes must give the same pixels (within 1 for uint8, 1e-3 for float). Skips
// without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/gpu.h"
#include "core/half.h"
#include "pipeline/executor/pipeline.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

// Odd sizes, a 1-pixel-wide one and gray and RGBA images among them.
struct Source {
  int width;
  int height;
  int channels;
};
constexpr Source kSources[] = {{37, 53, 3}, {101, 67, 3}, {1, 9, 3},   {255, 3, 3},
                               {64, 48, 3}, {13, 211, 3}, {33, 17, 3}, {90, 91, 3}};

std::vector<Tensor> encoded_images(int channels) {
  std::vector<Tensor> out;
  int k = 0;
  for (const Source& s : kSources) {
    auto pattern = (k++ % 2) ? testing::Pattern::kCheckerboard : testing::Pattern::kGradient;
    std::vector<uint8_t> pixels = testing::make_pixels(s.width, s.height, channels, pattern);
    std::vector<uint8_t> png = testing::encode_png(pixels, s.width, s.height, channels);
    Tensor t(DType::kU8, Shape{static_cast<int64_t>(png.size())});
    std::copy(png.begin(), png.end(), t.data<uint8_t>());
    out.push_back(t);
  }
  return out;
}

// reader + decode (+ a coin for per-sample mirrors) + `steps`, each on `gpu` or not.
std::vector<OpSpec> with_steps(const std::vector<OpSpec>& steps, bool gpu, int channels) {
  std::vector<OpSpec> ops{
      {"readers.external_source", {}, {}, {"encoded", "label"}, {}},
      {"decoders.image",
       {{"output_type", std::string(channels == 1 ? "GRAY" : "RGB")}},
       {"encoded"},
       {"images"},
       {}},
      {"random.coin_flip", {}, {}, {"coin"}, {}},
  };
  for (OpSpec step : steps) {
    step.gpu = gpu;
    ops.push_back(std::move(step));
  }
  return ops;
}

Batch run_once(const std::vector<OpSpec>& ops, int channels, bool on_device = false) {
  PipelineOptions options;
  options.batch_size = static_cast<int64_t>(std::size(kSources));
  options.num_threads = 2;
  options.seed = 11;
  options.outputs = {ops.back().outputs[0]};
  options.gpu_outputs_on_device = on_device;
  options.bad_data = BadDataPolicy::kError;
  auto p = Pipeline::create(options, ops);
  KILN_CHECK(p.ok(), p.status().to_string());
  KILN_CHECK((*p)->feed(encoded_images(channels)).ok(), "feed");
  auto batch = (*p)->run();
  KILN_CHECK(batch.ok() && batch->has_value(), batch.status().to_string());
  return std::move(**batch);
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kU8: return t.data<uint8_t>()[i];
    case DType::kF32: return t.data<float>()[i];
    case DType::kF16: return static_cast<float>(t.data<Half>()[i]);
    default: KILN_CHECK(false, "unexpected dtype"); return 0;
  }
}

// Runs `steps` on both devices and compares every sample.
void expect_same_on_both(const std::vector<OpSpec>& steps, int channels = 3) {
  Batch cpu = run_once(with_steps(steps, false, channels), channels);
  Batch gpu = run_once(with_steps(steps, true, channels), channels);
  const TensorList& a = cpu.outputs[0];
  const TensorList& b = gpu.outputs[0];
  ASSERT_EQ(a.samples.size(), b.samples.size());
  EXPECT_EQ(a.dense.defined(), b.dense.defined());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    const Tensor& x = a.samples[i];
    const Tensor& y = b.samples[i];
    ASSERT_EQ(x.shape(), y.shape()) << "sample " << i;
    ASSERT_EQ(x.dtype(), y.dtype()) << "sample " << i;
    const double tolerance = x.dtype() == DType::kU8 ? 1.0 : 1e-3;
    double worst = 0.0;
    int64_t differ = 0;
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double d = std::abs(value_at(x, k) - value_at(y, k));
      worst = std::max(worst, d);
      differ += d > 0 ? 1 : 0;
    }
    EXPECT_LE(worst, tolerance) << "sample " << i << " " << x.shape().to_string() << ": " << differ
                                << " of " << x.numel() << " values differ";
  }
}

class PipelineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  }
};

OpSpec resize(ArgMap args) {
  return {"resize", std::move(args), {"images"}, {"resized"}, {}};
}

TEST_F(PipelineGpu, ResizeMatchesTheCpuInEveryMode) {
  for (const char* interp : {"linear", "cubic", "nearest"}) {
    for (bool antialias : {true, false}) {
      SCOPED_TRACE(fmt::format("{} antialias {}", interp, antialias));
      // Down (antialiased taps grow with the factor) and up.
      expect_same_on_both({resize({{"resize_x", int64_t{19}},
                                   {"resize_y", int64_t{7}},
                                   {"interp_type", std::string(interp)},
                                   {"antialias", antialias}})});
      expect_same_on_both({resize({{"resize_x", int64_t{203}},
                                   {"resize_y", int64_t{150}},
                                   {"interp_type", std::string(interp)},
                                   {"antialias", antialias}})});
    }
  }
}

TEST_F(PipelineGpu, RaggedResizeKeepsEachSamplesShape) {
  // resize_shorter keeps each aspect: no dense batch, each sample its own shape.
  expect_same_on_both({resize({{"resize_shorter", int64_t{21}}})});
}

TEST_F(PipelineGpu, RandomResizedCropDrawsTheSameWindows) {
  expect_same_on_both(
      {{"random_resized_crop", {{"size", std::vector<int64_t>{24, 31}}}, {"images"}, {"out"}, {}}});
}

TEST_F(PipelineGpu, CropAndFlipMatchTheCpu) {
  expect_same_on_both(
      {resize({{"resize_x", int64_t{40}}, {"resize_y", int64_t{30}}}),
       {"crop",
        {{"crop", std::vector<int64_t>{17, 23}}, {"crop_pos_x", 0.3}, {"crop_pos_y", 0.9}},
        {"resized"},
        {"cropped"},
        {}},
       {"flip", {{"vertical", int64_t{1}}}, {"cropped"}, {"flipped"}, {{"horizontal", "coin"}}}});
}

TEST_F(PipelineGpu, CropMirrorNormalizeMatchesTheCpuInEveryLayoutAndType) {
  for (const char* layout : {"CHW", "HWC"}) {
    for (const char* dtype : {"float32", "float16", "uint8"}) {
      SCOPED_TRACE(fmt::format("{} {}", layout, dtype));
      expect_same_on_both({resize({{"resize_x", int64_t{45}}, {"resize_y", int64_t{33}}}),
                           {"crop_mirror_normalize",
                            {{"crop", std::vector<int64_t>{29, 31}},
                             {"mean", std::vector<double>{123.675, 116.28, 103.53}},
                             {"std", std::vector<double>{58.395, 57.12, 57.375}},
                             {"output_layout", std::string(layout)},
                             {"dtype", std::string(dtype)}},
                            {"resized"},
                            {"out"},
                            {{"mirror", "coin"}}}});
    }
  }
}

TEST_F(PipelineGpu, GrayImagesTakeTheSamePath) {
  expect_same_on_both({resize({{"resize_x", int64_t{16}}, {"resize_y", int64_t{12}}}),
                       {"crop_mirror_normalize",
                        {{"mean", std::vector<double>{127.5}}, {"std", std::vector<double>{2.0}}},
                        {"resized"},
                        {"out"},
                        {{"mirror", "coin"}}}},
                      1);
}

TEST_F(PipelineGpu, OutputsCanStayOnTheDevice) {
  const std::vector<OpSpec> steps{
      {"random_resized_crop", {{"size", std::vector<int64_t>{16, 16}}}, {"images"}, {"crops"}, {}},
      {"crop_mirror_normalize",
       {{"mean", std::vector<double>{100.0}}, {"std", std::vector<double>{50.0}}},
       {"crops"},
       {"out"},
       {{"mirror", "coin"}}}};
  Batch host = run_once(with_steps(steps, true, 3), 3);
  Batch device = run_once(with_steps(steps, true, 3), 3, true);
  const kernels::GpuImages& images = device.outputs[0].gpu;
  ASSERT_EQ(images.size(), std::size(kSources));
  EXPECT_FALSE(device.outputs[0].dense.defined());
  EXPECT_TRUE(device.outputs[0].samples.empty());
  ASSERT_EQ(images.uniform_shape(), Shape({3, 16, 16}));
  EXPECT_EQ(images.dtype, DType::kF32);
  for (size_t i = 0; i < images.size(); ++i) {
    Tensor t(DType::kF32, Shape{3, 16, 16});
    ASSERT_TRUE(gpu_download(t.raw_data(),
                             static_cast<const uint8_t*>(images.data.get()) + images.offsets[i],
                             t.nbytes())
                    .ok());
    EXPECT_TRUE(t.equals(host.outputs[0].samples[i])) << "sample " << i;
  }
}

}  // namespace
}  // namespace kiln::pipeline
