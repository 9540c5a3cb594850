// SPDX-License-Identifier: Apache-2.0
// The GPU operators against the CPU ones: the same pipeline run with device "cpu" and "gpu" on
// PNG images of odd sizes must give the same pixels (within 1 for uint8, 1e-3 for float). Skips
// without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

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
    step.gpu = gpu && !step.op.starts_with("random.");
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
    case DType::kI32: return t.data<int32_t>()[i];
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

TEST_F(PipelineGpu, ColourOperatorsMatchTheCpuWithPerSampleArguments) {
  // Each image gets its own table or matrix from random.uniform's per-sample values.
  const OpSpec uniform{"random.uniform", {{"range", std::vector<double>{0.5, 1.5}}}, {}, {"u"}, {}};
  const OpSpec degrees{
      "random.uniform", {{"range", std::vector<double>{-60.0, 60.0}}}, {}, {"deg"}, {}};
  expect_same_on_both({uniform,
                       {"brightness_contrast",
                        {{"brightness_shift", 0.1}, {"contrast_center", 100.0}},
                        {"images"},
                        {"out"},
                        {{"brightness", "u"}, {"contrast", "u"}}}});
  expect_same_on_both({{"gamma", {{"gamma", 0.45}}, {"images"}, {"out"}, {}}});
  expect_same_on_both(
      {uniform, degrees, {"hsv", {}, {"images"}, {"out"}, {{"saturation", "u"}, {"hue", "deg"}}}});
  expect_same_on_both({uniform,
                       degrees,
                       {"color_twist",
                        {{"brightness", 1.1}},
                        {"images"},
                        {"out"},
                        {{"contrast", "u"}, {"hue", "deg"}, {"saturation", "u"}}}});
  expect_same_on_both({{"gamma", {{"gamma", 2.2}}, {"images"}, {"out"}, {}}}, 1);
}

TEST_F(PipelineGpu, WarpsMatchTheCpu) {
  const OpSpec degrees{
      "random.uniform", {{"range", std::vector<double>{-180.0, 180.0}}}, {}, {"deg"}, {}};
  for (const char* interp : {"linear", "nearest"}) {
    SCOPED_TRACE(interp);
    expect_same_on_both(
        {degrees,
         {"rotate",
          {{"interp_type", std::string(interp)}, {"angle", 0.0}, {"fill_value", int64_t{17}}},
          {"images"},
          {"out"},
          {{"angle", "deg"}}}});
    expect_same_on_both(
        {degrees,
         {"rotate",
          {{"interp_type", std::string(interp)}, {"angle", 0.0}, {"keep_size", true}},
          {"images"},
          {"out"},
          {{"angle", "deg"}}}});
    expect_same_on_both({{"warp_affine",
                          {{"matrix", std::vector<double>{0.8, 0.3, -4.0, -0.25, 1.3, 2.5}},
                           {"size", std::vector<int64_t>{29, 41}},
                           {"interp_type", std::string(interp)}},
                          {"images"},
                          {"out"},
                          {}}});
  }
}

TEST_F(PipelineGpu, BlurAndNoiseMatchTheCpuWithPerSampleArguments) {
  // Sigmas from 0.3 (a 3-tap window) to 4 (25 taps, wider than the 1- and 3-pixel images, so the
  // reflected borders fold more than once).
  const OpSpec sigma{"random.uniform", {{"range", std::vector<double>{0.3, 4.0}}}, {}, {"s"}, {}};
  expect_same_on_both({sigma, {"gaussian_blur", {}, {"images"}, {"out"}, {{"sigma", "s"}}}});
  expect_same_on_both(
      {{"gaussian_blur", {{"sigma", 1.5}, {"window_size", int64_t{5}}}, {"images"}, {"out"}, {}}},
      1);
  // Each sample draws its own noise from its seed, as the CPU does.
  const OpSpec stddev{"random.uniform", {{"range", std::vector<double>{0.0, 40.0}}}, {}, {"d"}, {}};
  expect_same_on_both(
      {stddev, {"noise.gaussian", {{"mean", 3.5}}, {"images"}, {"out"}, {{"stddev", "d"}}}});
  expect_same_on_both({{"noise.gaussian", {{"stddev", 20.0}}, {"images"}, {"out"}, {}}}, 1);
  const OpSpec prob{"random.uniform", {{"range", std::vector<double>{0.0, 0.5}}}, {}, {"p"}, {}};
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per channel" : "per pixel");
    expect_same_on_both({prob,
                         {"noise.salt_and_pepper",
                          {{"salt_vs_pepper", 0.3}, {"per_channel", per_channel}},
                          {"images"},
                          {"out"},
                          {{"prob", "p"}}}});
  }
}

TEST_F(PipelineGpu, PadAndCastMatchTheCpu) {
  expect_same_on_both(
      {{"pad",
        {{"size", std::vector<int64_t>{60, 40}}, {"align", int64_t{8}}, {"fill_value", 300.0}},
        {"images"},
        {"out"},
        {}}});
  // float32 images: cast up, pad with a fraction, and back down (rounding and saturating).
  expect_same_on_both({{"cast", {{"dtype", std::string("float32")}}, {"images"}, {"f"}, {}},
                       {"pad", {{"align", int64_t{16}}, {"fill_value", -2.75}}, {"f"}, {"p"}, {}},
                       {"cast", {{"dtype", std::string("int32")}}, {"p"}, {"i"}, {}},
                       {"cast", {{"dtype", std::string("float32")}}, {"i"}, {"g"}, {}}});
  expect_same_on_both({{"crop_mirror_normalize",
                        {{"mean", std::vector<double>{128.0}},
                         {"std", std::vector<double>{0.25}},
                         {"output_layout", std::string("HWC")}},
                        {"images"},
                        {"n"},
                        {}},
                       {"cast", {{"dtype", std::string("uint8")}}, {"n"}, {"u"}, {}}});
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

// Decodes `encoded` with `op` (decoders.image or decoders.image_random_crop) on `gpu` or not; the
// images.
std::vector<Tensor> decode_all(const std::vector<Tensor>& encoded, const std::string& color,
                               bool gpu, double hw_decoder_load = 1.0,
                               const std::string& op = "decoders.image") {
  OpSpec decode{op,
                {{"output_type", color}, {"hw_decoder_load", hw_decoder_load}},
                {"encoded"},
                {"images"},
                {}};
  decode.gpu = gpu;
  PipelineOptions options;
  options.batch_size = static_cast<int64_t>(encoded.size());
  options.num_threads = 2;
  options.outputs = {"images"};
  options.bad_data = BadDataPolicy::kError;
  auto p = Pipeline::create(
      options, {{"readers.external_source", {}, {}, {"encoded", "label"}, {}}, decode});
  KILN_CHECK(p.ok(), p.status().to_string());
  KILN_CHECK((*p)->feed(encoded).ok(), "feed");
  auto batch = (*p)->run();
  KILN_CHECK(batch.ok() && batch->has_value(), batch.status().to_string());
  return (*batch)->outputs[0].samples;
}

// How far two decodes of the same images lie apart (equal shapes asserted): mean and largest
// |difference| over every value.
struct Distance {
  double mean = 0.0;
  double worst = 0.0;
};
Distance distance(const std::vector<Tensor>& cpu, const std::vector<Tensor>& gpu) {
  EXPECT_EQ(cpu.size(), gpu.size());
  double total = 0.0;
  Distance d;
  int64_t count = 0;
  for (size_t i = 0; i < cpu.size() && i < gpu.size(); ++i) {
    EXPECT_EQ(cpu[i].shape(), gpu[i].shape()) << "image " << i;
    if (cpu[i].shape() != gpu[i].shape()) continue;
    for (int64_t k = 0; k < cpu[i].numel(); ++k) {
      const double diff = std::abs(value_at(cpu[i], k) - value_at(gpu[i], k));
      total += diff;
      d.worst = std::max(d.worst, diff);
      ++count;
    }
  }
  d.mean = count > 0 ? total / static_cast<double>(count) : 0.0;
  return d;
}

Tensor bytes_tensor(const std::vector<uint8_t>& bytes) {
  Tensor t(DType::kU8, Shape{static_cast<int64_t>(bytes.size())});
  std::copy(bytes.begin(), bytes.end(), t.data<uint8_t>());
  return t;
}

TEST_F(PipelineGpu, JpegDecodeOnTheGpuIsCloseToLibjpegAndTheRestExact) {
  std::string why;
  const bool hardware = kernels::gpu_jpeg_decoder_available(&why);
  if (!hardware)
    std::fprintf(stderr, "no GPU JPEG decoder (%s): every image decodes on the CPU\n", why.c_str());
  std::vector<Tensor> jpegs;
  std::vector<Tensor> exact;  // PNG and progressive JPEG: decoded on the CPU either way
  for (const Source& s : kSources) {
    std::vector<uint8_t> pixels =
        testing::make_pixels(s.width, s.height, 3, testing::Pattern::kGradient);
    for (int subsamp : {2 /* TJSAMP_420 */, 0 /* TJSAMP_444 */}) {
      jpegs.push_back(
          bytes_tensor(testing::encode_jpeg(pixels, s.width, s.height, 3, 90, subsamp)));
    }
    exact.push_back(bytes_tensor(testing::encode_png(pixels, s.width, s.height, 3)));
    exact.push_back(bytes_tensor(
        testing::encode_jpeg(pixels, s.width, s.height, 3, 90, 2, 1 << 14 /* progressive */)));
  }
  for (const char* color : {"RGB", "BGR", "GRAY"}) {
    SCOPED_TRACE(color);
    std::vector<Tensor> cpu = decode_all(jpegs, color, false);
    std::vector<Tensor> gpu = decode_all(jpegs, color, true);
    const Distance d = distance(cpu, gpu);
    std::fprintf(stderr, "%s: GPU decode against libjpeg-turbo: mean |diff| %.3f, max %.0f\n",
                 color, d.mean, d.worst);
    // Two decoders of one JPEG differ by their IDCT and chroma upsampling, not by content.
    EXPECT_LT(d.mean, 2.0);
    EXPECT_LE(d.worst, 40.0);
    // With no load on the hardware decoder, the workers decode every JPEG: exactly the CPU's.
    std::vector<Tensor> all_on_cpu = decode_all(jpegs, color, true, 0.0);
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_TRUE(cpu[i].equals(all_on_cpu[i])) << "image " << i;
    }
    // Shared, some of each: each image is one decoder's or the other's.
    std::vector<Tensor> shared = decode_all(jpegs, color, true, 0.5);
    int on_cpu = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      on_cpu += cpu[i].equals(shared[i]) ? 1 : 0;
      if (!cpu[i].equals(shared[i])) {
        EXPECT_TRUE(gpu[i].equals(shared[i])) << "image " << i;
      }
    }
    if (hardware && std::string(color) != "GRAY") {
      EXPECT_GT(on_cpu, 0);
      EXPECT_LT(on_cpu, static_cast<int>(cpu.size()));
    }
    std::vector<Tensor> cpu_exact = decode_all(exact, color, false);
    std::vector<Tensor> gpu_exact = decode_all(exact, color, true);
    for (size_t i = 0; i < cpu_exact.size(); ++i) {
      EXPECT_TRUE(cpu_exact[i].equals(gpu_exact[i])) << "image " << i;
    }
  }
}

TEST_F(PipelineGpu, RandomCropDecodeCutsTheCpusWindowsOnTheGpu) {
  // The same windows on both devices (so the same shapes); the hardware decoder's pixels within
  // its IDCT's difference, the CPU's share exactly the CPU's.
  const std::string op = "decoders.image_random_crop";
  std::vector<Tensor> jpegs;
  for (const Source& s : kSources) {
    std::vector<uint8_t> pixels =
        testing::make_pixels(s.width, s.height, 3, testing::Pattern::kGradient);
    jpegs.push_back(bytes_tensor(testing::encode_jpeg(pixels, s.width, s.height, 3, 90, 2)));
    jpegs.push_back(bytes_tensor(testing::encode_png(pixels, s.width, s.height, 3)));
  }
  std::vector<Tensor> cpu = decode_all(jpegs, "RGB", false, 1.0, op);
  std::vector<Tensor> gpu = decode_all(jpegs, "RGB", true, 1.0, op);
  const Distance d = distance(cpu, gpu);
  for (size_t i = 1; i < cpu.size() && i < gpu.size(); i += 2) {
    EXPECT_TRUE(cpu[i].equals(gpu[i])) << "PNG " << i;
  }
  std::fprintf(stderr,
               "random crop decode on the GPU against the CPU: mean |diff| %.3f, max %.0f\n",
               d.mean, d.worst);
  EXPECT_LT(d.mean, 2.0);
  EXPECT_LE(d.worst, 40.0);
  std::vector<Tensor> all_on_cpu = decode_all(jpegs, "RGB", true, 0.0, op);
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(cpu[i].equals(all_on_cpu[i])) << "image " << i;
  }
}

TEST_F(PipelineGpu, ATruncatedJpegIsSkippedLikeOnTheCpu) {
  std::vector<uint8_t> pixels = testing::make_pixels(64, 48, 3, testing::Pattern::kGradient);
  std::vector<uint8_t> good = testing::encode_jpeg(pixels, 64, 48, 3, 90, 2);
  std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
  OpSpec decode{"decoders.image", {}, {"encoded"}, {"images"}, {}};
  decode.gpu = true;
  PipelineOptions options;
  options.batch_size = 3;
  options.outputs = {"images"};
  auto p = Pipeline::create(
      options, {{"readers.external_source", {}, {}, {"encoded", "label"}, {}}, decode});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE((*p)->feed({bytes_tensor(good), bytes_tensor(cut), bytes_tensor(good)}).ok());
  auto batch = (*p)->run();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().to_string();
  EXPECT_EQ((*batch)->outputs[0].samples.size(), 2u);
  ASSERT_EQ((*p)->bad_samples().size(), 1u);
  EXPECT_EQ((*p)->bad_samples()[0].path, "external #1");
}

TEST_F(PipelineGpu, FileReaderBatchesOverlapCpuAndGpuAndMatchTheCpuEveryEpoch) {
  // readers.file runs the GPU stage on its own thread: batches must still come in order, equal
  // to the CPU pipeline's, across epochs and a reset in the middle of one.
  testing::TempDir dir;
  int k = 0;
  for (const Source& s : kSources) {
    for (int copy = 0; copy < 3; ++copy, ++k) {
      std::vector<uint8_t> pixels =
          testing::make_pixels(s.width + copy, s.height, 3, testing::Pattern::kGradient);
      testing::write_bytes(dir.file(fmt::format("c{}/{:02d}.png", k % 2, k)),
                           testing::encode_png(pixels, s.width + copy, s.height, 3));
    }
  }
  auto make = [&](bool gpu) {
    std::vector<OpSpec> ops{
        {"readers.file",
         {{"file_root", dir.path()}, {"random_shuffle", true}},
         {},
         {"encoded", "label"},
         {}},
        {"decoders.image", {}, {"encoded"}, {"images"}, {}},
        {"random.coin_flip", {}, {}, {"coin"}, {}},
        {"random_resized_crop",
         {{"size", std::vector<int64_t>{20, 24}}},
         {"images"},
         {"crops"},
         {}},
        {"crop_mirror_normalize",
         {{"mean", std::vector<double>{128.0}}, {"std", std::vector<double>{64.0}}},
         {"crops"},
         {"out"},
         {{"mirror", "coin"}}}};
    for (size_t i = 1; i < ops.size(); ++i) ops[i].gpu = gpu && ops[i].op != "random.coin_flip";
    PipelineOptions options;
    options.batch_size = 5;
    options.num_threads = 2;
    options.prefetch_queue_depth = 2;
    options.seed = 4;
    options.outputs = {"out", "label"};
    auto p = Pipeline::create(options, ops);
    KILN_CHECK(p.ok(), p.status().to_string());
    return std::move(*p);
  };
  auto cpu = make(false);
  auto gpu = make(true);
  auto expect_same_batches = [&](int max_batches) {
    for (int b = 0; b < max_batches; ++b) {
      auto x = cpu->run();
      auto y = gpu->run();
      ASSERT_TRUE(x.ok() && y.ok()) << y.status().to_string();
      ASSERT_EQ(x->has_value(), y->has_value()) << "batch " << b;
      if (!x->has_value()) return;
      EXPECT_EQ((*x)->paths, (*y)->paths) << "batch " << b;
      EXPECT_TRUE((*x)->outputs[1].dense.equals((*y)->outputs[1].dense));
      // Within one uint8 step of the resize, divided by the std.
      const Tensor& a = (*x)->outputs[0].dense;
      const Tensor& c = (*y)->outputs[0].dense;
      ASSERT_EQ(a.shape(), c.shape());
      for (int64_t i = 0; i < a.numel(); ++i) {
        ASSERT_NEAR(a.data<float>()[i], c.data<float>()[i], 1.0 / 64 + 1e-3)
            << "batch " << b << " @" << i;
      }
    }
  };
  expect_same_batches(100);  // epoch 0, to its end
  cpu->reset();
  gpu->reset();
  expect_same_batches(2);  // part of epoch 1
  cpu->reset();
  gpu->reset();
  expect_same_batches(100);  // epoch 2 after a reset in the middle of epoch 1
  EXPECT_EQ(gpu->epoch(), 2);
}

}  // namespace
}  // namespace kiln::pipeline
