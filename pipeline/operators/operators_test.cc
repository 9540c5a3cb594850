// SPDX-License-Identifier: Apache-2.0
// Tests the per-sample operators through the registry: output shapes, values and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "pipeline/operators/operator.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;

Tensor image(int64_t h, int64_t w, int64_t c) {
  Tensor t(DType::kU8, Shape{h, w, c});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(i % 256);
  return t;
}

// Creates `name` with `args` and runs it on one sample; per-sample values override static ones.
Result<Tensor> run_op(const std::string& name, const ArgMap& args, std::vector<Tensor> inputs,
                      const std::map<std::string, double>& sample_values = {}, uint64_t seed = 1) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Operator> op, create_operator(name, args));
  OpArgs sample_args = op->args();
  for (const auto& [arg, value] : sample_values) sample_args.set_sample_value(arg, value);
  SampleContext ctx;
  ctx.seed = seed;
  ctx.path = "sample.jpg";
  std::vector<Tensor> outputs;
  KILN_RETURN_IF_ERROR(op->run(ctx, sample_args, inputs, &outputs));
  KILN_CHECK(outputs.size() == 1);
  return outputs[0];
}

TEST(OperatorsTest, ResizeSizesKeepTheAspectRatioWhenAsked) {
  Tensor in = image(30, 40, 3);
  auto fixed = run_op("resize", {{"resize_x", int64_t{8}}, {"resize_y", int64_t{5}}}, {in});
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  EXPECT_EQ(fixed->shape(), Shape({5, 8, 3}));
  auto shorter = run_op("resize", {{"resize_shorter", int64_t{15}}}, {in});
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(shorter->shape(), Shape({15, 20, 3}));
  auto only_x = run_op("resize", {{"resize_x", int64_t{20}}}, {in});
  ASSERT_TRUE(only_x.ok());
  EXPECT_EQ(only_x->shape(), Shape({15, 20, 3}));
  auto per_sample = run_op("resize", {{"resize_x", int64_t{20}}, {"resize_y", int64_t{10}}}, {in},
                           {{"resize_y", 7.0}});
  ASSERT_TRUE(per_sample.ok());
  EXPECT_EQ(per_sample->shape(), Shape({7, 20, 3}));
  auto nearest = run_op("resize",
                        {{"resize_x", int64_t{20}},
                         {"resize_y", int64_t{15}},
                         {"interp_type", std::string("nearest")}},
                        {in});
  ASSERT_TRUE(nearest.ok());
  // Output pixel (0, 0) has its centre over source pixel (1, 1) at scale 2.
  EXPECT_EQ(nearest->data<uint8_t>()[0], in.data<uint8_t>()[(1 * 40 + 1) * 3]);
  auto bad =
      run_op("resize", {{"resize_x", int64_t{8}}, {"interp_type", std::string("area")}}, {in});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("interp_type \"area\""));
  auto not_image = run_op("resize", {{"resize_x", int64_t{8}}}, {Tensor(DType::kU8, Shape{4})});
  ASSERT_FALSE(not_image.ok());
  EXPECT_THAT(not_image.status().message(), HasSubstr("operator resize: expected a non-empty HWC"));
}

TEST(OperatorsTest, CropTakesTheWindowAtTheRelativePosition) {
  Tensor in = image(6, 8, 1);
  auto out = run_op("crop", {{"crop", std::vector<int64_t>{2, 3}}}, {in},
                    {{"crop_pos_x", 1.0}, {"crop_pos_y", 0.0}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->shape(), Shape({2, 3, 1}));
  EXPECT_EQ(std::vector<uint8_t>(out->data<uint8_t>(), out->data<uint8_t>() + 6),
            (std::vector<uint8_t>{5, 6, 7, 13, 14, 15}));
  auto too_big = run_op("crop", {{"crop", std::vector<int64_t>{7, 3}}}, {in});
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("crop 7x3 (HxW) is larger than the 6x8 image"));
}

TEST(OperatorsTest, FlipFollowsItsPerSampleArguments) {
  Tensor in = image(2, 3, 1);
  auto none = run_op("flip", {}, {in}, {{"horizontal", 0.0}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->equals(in));
  auto both = run_op("flip", {{"vertical", int64_t{1}}}, {in});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(std::vector<uint8_t>(both->data<uint8_t>(), both->data<uint8_t>() + 6),
            (std::vector<uint8_t>{5, 4, 3, 2, 1, 0}));
}

TEST(OperatorsTest, CropMirrorNormalizeLayoutsDtypesAndErrors) {
  Tensor in = image(4, 4, 3);
  auto chw = run_op("crop_mirror_normalize",
                    {{"crop", std::vector<int64_t>{2, 2}}, {"mean", 10.0}, {"std", 2.0}}, {in});
  ASSERT_TRUE(chw.ok()) << chw.status().to_string();
  ASSERT_EQ(chw->shape(), Shape({3, 2, 2}));
  // Centre window starts at (1, 1): element (c=1, y=0, x=0) is pixel (1, 1) channel 1 = 16.
  EXPECT_FLOAT_EQ(chw->data<float>()[4], (16.0f - 10.0f) / 2.0f);
  auto u8 = run_op("crop_mirror_normalize",
                   {{"output_layout", std::string("HWC")}, {"dtype", std::string("uint8")}}, {in},
                   {{"mirror", 1.0}});
  ASSERT_TRUE(u8.ok());
  ASSERT_EQ(u8->shape(), Shape({4, 4, 3}));
  EXPECT_EQ(u8->data<uint8_t>()[0], in.data<uint8_t>()[9]);  // pixel (0, 3) channel 0
  auto wrong_mean = run_op("crop_mirror_normalize", {{"mean", std::vector<double>{1, 2}}}, {in});
  ASSERT_FALSE(wrong_mean.ok());
  EXPECT_THAT(wrong_mean.status().message(), HasSubstr("mean has 2 values for a 3-channel image"));
  auto zero_std = create_operator("crop_mirror_normalize", {{"std", 0.0}});
  ASSERT_FALSE(zero_std.ok());
  EXPECT_THAT(zero_std.status().message(), HasSubstr("std must not contain 0"));
  auto layout = create_operator("crop_mirror_normalize", {{"output_layout", std::string("NHWC")}});
  ASSERT_FALSE(layout.ok());
  EXPECT_THAT(layout.status().message(), HasSubstr("output_layout \"NHWC\""));
}

TEST(OperatorsTest, RandomSourcesAreSeededAndInRange) {
  std::vector<float> values;
  int heads = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    auto u = run_op("random.uniform", {{"range", std::vector<double>{2.0, 3.0}}}, {}, {}, seed);
    auto c = run_op("random.coin_flip", {{"probability", 0.25}}, {}, {}, seed);
    ASSERT_TRUE(u.ok() && c.ok());
    values.push_back(*u->data<float>());
    heads += *c->data<int32_t>();
    EXPECT_EQ(*run_op("random.uniform", {{"range", std::vector<double>{2.0, 3.0}}}, {}, {}, seed)
                   ->data<float>(),
              values.back());
  }
  EXPECT_GE(*std::min_element(values.begin(), values.end()), 2.0f);
  EXPECT_LT(*std::max_element(values.begin(), values.end()), 3.0f);
  EXPECT_NEAR(heads / 400.0, 0.25, 0.07);
  EXPECT_FALSE(create_operator("random.uniform", {{"range", std::vector<double>{3, 2}}}).ok());
}

TEST(OperatorsTest, RandomResizedCropIsSeededAndTakesFixedPositions) {
  Tensor in = image(120, 160, 3);
  ArgMap args{{"size", std::vector<int64_t>{32, 48}}};
  auto a = run_op("random_resized_crop", args, {in}, {}, 5);
  auto b = run_op("random_resized_crop", args, {in}, {}, 5);
  auto c = run_op("random_resized_crop", args, {in}, {}, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().to_string();
  EXPECT_EQ(a->shape(), Shape({32, 48, 3}));
  EXPECT_TRUE(a->equals(*b));
  EXPECT_FALSE(a->equals(*c));
  // The whole image at a fixed position is a plain resize.
  auto whole = run_op("random_resized_crop",
                      {{"size", std::vector<int64_t>{60, 80}},
                       {"random_area", std::vector<double>{1.0, 1.0}},
                       {"random_aspect_ratio", std::vector<double>{4.0 / 3.0, 4.0 / 3.0}},
                       {"crop_pos_x", 0.0},
                       {"crop_pos_y", 0.0}},
                      {in});
  auto resized = run_op("resize", {{"resize_x", int64_t{80}}, {"resize_y", int64_t{60}}}, {in});
  ASSERT_TRUE(whole.ok() && resized.ok());
  EXPECT_TRUE(whole->equals(*resized));
  auto bad = create_operator("random_resized_crop", {{"size", std::vector<int64_t>{0, 3}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("operator random_resized_crop: size"));
  EXPECT_FALSE(create_operator("random_resized_crop", {}).ok());
}

// rotate and warp_affine share one check of size, interp_type and fill_value; each error names its
// operator.
TEST(OperatorsTest, WarpArgumentsAreCheckedForRotateAndWarpAffine) {
  const std::vector<double> identity = {1, 0, 0, 0, 1, 0};
  struct Case {
    std::string op;
    ArgMap args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"rotate",
       {{"angle", 10.0}, {"fill_value", int64_t{256}}},
       "operator rotate: fill_value must be in [0, 255], got 256"},
      {"rotate",
       {{"angle", 10.0}, {"interp_type", std::string("cubic")}},
       "operator rotate: interp_type \"cubic\": expected nearest or linear"},
      {"warp_affine",
       {{"matrix", identity}, {"size", std::vector<int64_t>{4}}},
       "operator warp_affine: size must be empty or [height, width] > 0, got [4]"},
      {"warp_affine",
       {{"matrix", identity}, {"fill_value", int64_t{-1}}},
       "operator warp_affine: fill_value must be in [0, 255], got -1"},
  };
  for (const Case& c : cases) {
    auto op = create_operator(c.op, c.args);
    ASSERT_FALSE(op.ok()) << c.message;
    EXPECT_THAT(op.status().message(), HasSubstr(c.message));
  }
  EXPECT_TRUE(create_operator("rotate", {{"angle", 10.0}, {"fill_value", int64_t{255}}}).ok());
  EXPECT_TRUE(create_operator("warp_affine", {{"matrix", identity}}).ok());
}

TEST(OperatorsTest, ResizeLongerAndMaxSize) {
  Tensor in = image(30, 40, 3);
  auto longer = run_op("resize", {{"resize_longer", int64_t{20}}}, {in});
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->shape(), Shape({15, 20, 3}));
  auto capped =
      run_op("resize", {{"resize_shorter", int64_t{60}}, {"max_size", int64_t{64}}}, {in});
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->shape(), Shape({48, 64, 3}));
  auto cubic = run_op(
      "resize",
      {{"resize_x", int64_t{17}}, {"resize_y", int64_t{11}}, {"interp_type", std::string("cubic")}},
      {in});
  ASSERT_TRUE(cubic.ok());
  EXPECT_EQ(cubic->shape(), Shape({11, 17, 3}));
}

TEST(OperatorsTest, AugmentationOperatorsRunWithTheirShapesAndErrors) {
  Tensor rgb = image(21, 34, 3), gray = image(21, 34, 1);
  struct Case {
    std::string op;
    ArgMap args;
    Tensor input;
    Shape expected;
  };
  const std::vector<Case> cases = {
      {"brightness_contrast", {{"brightness", 1.2}, {"contrast", 0.5}}, gray, Shape{21, 34, 1}},
      {"color_twist", {{"hue", 20.0}, {"saturation", 0.5}}, rgb, Shape{21, 34, 3}},
      {"hsv", {{"hue", 90.0}}, rgb, Shape{21, 34, 3}},
      {"gamma", {{"gamma", 2.2}}, gray, Shape{21, 34, 1}},
      {"gaussian_blur", {{"sigma", 1.5}}, rgb, Shape{21, 34, 3}},
      {"noise.gaussian", {{"stddev", 5.0}}, rgb, Shape{21, 34, 3}},
      {"noise.salt_and_pepper", {{"prob", 0.1}}, gray, Shape{21, 34, 1}},
      {"rotate", {{"angle", 90.0}}, rgb, Shape{34, 21, 3}},
      {"rotate", {{"angle", 30.0}, {"keep_size", true}}, rgb, Shape{21, 34, 3}},
      {"warp_affine",
       {{"matrix", std::vector<double>{0.5, 0, 0, 0, 0.5, 0}},
        {"size", std::vector<int64_t>{42, 68}}},
       rgb,
       Shape{42, 68, 3}},
      {"pad",
       {{"size", std::vector<int64_t>{24, 30}}, {"align", int64_t{8}}},
       rgb,
       Shape{24, 40, 3}},
      {"cast", {{"dtype", std::string("float32")}}, rgb, Shape{21, 34, 3}},
  };
  for (const Case& c : cases) {
    auto out = run_op(c.op, c.args, {c.input});
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status().to_string();
    EXPECT_EQ(out->shape(), c.expected) << c.op;
  }
  // Per-sample arguments reach the kernel.
  auto dark = run_op("brightness_contrast", {}, {rgb}, {{"brightness", 0.0}});
  ASSERT_TRUE(dark.ok());
  for (uint8_t v : dark->span<uint8_t>()) ASSERT_EQ(v, 0);
  auto hsv_gray = run_op("hsv", {}, {gray});
  ASSERT_FALSE(hsv_gray.ok());
  EXPECT_THAT(hsv_gray.status().message(), HasSubstr("operator hsv: expected 3-channel"));
  auto bad_gamma = run_op("gamma", {}, {rgb}, {{"gamma", -1.0}});
  ASSERT_FALSE(bad_gamma.ok());
  EXPECT_THAT(bad_gamma.status().message(), HasSubstr("gamma must be > 0"));
  EXPECT_FALSE(create_operator("gaussian_blur", {{"window_size", int64_t{4}}}).ok());
  EXPECT_FALSE(create_operator("warp_affine", {{"matrix", std::vector<double>{1, 0, 0}}}).ok());
  auto singular = create_operator(
      "warp_affine", {{"matrix", std::vector<double>{1, 2, 0, 2, 4, 0}}, {"inverse_map", false}});
  ASSERT_FALSE(singular.ok());
  EXPECT_THAT(singular.status().message(), HasSubstr("not invertible"));
  EXPECT_FALSE(create_operator("cast", {{"dtype", std::string("float64")}}).ok());
  EXPECT_FALSE(create_operator("rotate", {}).ok());  // angle is required
}

TEST(OperatorsTest, GpuPlansGiveTheShapesAndWindowsTheCpuRunMakes) {
  // Planned on the CPU, a GPU step must make what run() makes: same shape, dtype and (for the
  // random crop) the same window from the same seed.
  struct Case {
    std::string name;
    ArgMap args;
    std::map<std::string, double> sample_values;
  };
  const std::vector<Case> cases{
      {"resize", {{"resize_shorter", int64_t{17}}}, {}},
      {"random_resized_crop", {{"size", std::vector<int64_t>{9, 11}}}, {}},
      {"crop", {{"crop", std::vector<int64_t>{5, 7}}, {"crop_pos_x", 0.25}}, {}},
      {"flip", {{"vertical", int64_t{1}}}, {{"horizontal", 1.0}}},
      {"crop_mirror_normalize",
       {{"crop", std::vector<int64_t>{6, 8}}, {"dtype", std::string("float16")}},
       {{"mirror", 1.0}}},
      {"brightness_contrast", {{"contrast", 1.5}}, {{"brightness", 0.8}}},
      {"gamma", {{"gamma", 0.7}}, {}},
      {"hsv", {{"saturation", 0.5}}, {{"hue", 30.0}}},
      {"color_twist", {{"contrast", 1.2}}, {{"hue", -20.0}}},
      {"rotate", {{"interp_type", std::string("linear")}, {"angle", 0.0}}, {{"angle", 33.0}}},
      {"warp_affine", {{"matrix", std::vector<double>{0.9, 0.1, 2.0, -0.2, 1.1, -3.0}}}, {}},
      {"gaussian_blur", {}, {{"sigma", 2.5}}},
      {"noise.gaussian", {{"mean", 2.0}}, {{"stddev", 9.0}}},
      {"noise.salt_and_pepper", {{"per_channel", true}}, {{"prob", 0.2}}},
      {"pad", {{"size", std::vector<int64_t>{33, 35}}, {"align", int64_t{4}}}, {}},
      {"cast", {{"dtype", std::string("int32")}}, {}},
  };
  std::vector<std::string> covered;
  Tensor in = image(30, 40, 3);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto op = create_operator(c.name, c.args);
    ASSERT_TRUE(op.ok()) << op.status().to_string();
    ASSERT_TRUE((*op)->supports_gpu());
    OpArgs args = (*op)->args();
    for (const auto& [arg, value] : c.sample_values) args.set_sample_value(arg, value);
    SampleContext ctx;
    ctx.seed = 1;
    auto plan = (*op)->plan_gpu(ctx, args, in.shape(), in.dtype(), &in);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto ran = run_op(c.name, c.args, {in}, c.sample_values, 1);
    ASSERT_TRUE(ran.ok());
    EXPECT_EQ(plan->out_shape, ran->shape());
    EXPECT_EQ(plan->out_dtype, ran->dtype());
    covered.push_back(c.name);
  }
  // A decoder plans from the encoded bytes: what the GPU cannot decode (a PNG) is decoded here.
  Tensor png(DType::kU8, Shape{0});
  {
    std::vector<uint8_t> bytes =
        testing::encode_png(testing::make_pixels(13, 7, 3, testing::Pattern::kGradient), 13, 7, 3);
    png = Tensor(DType::kU8, Shape{static_cast<int64_t>(bytes.size())});
    std::copy(bytes.begin(), bytes.end(), png.data<uint8_t>());
  }
  auto decoder = create_operator("decoders.image", {});
  ASSERT_TRUE(decoder.ok());
  EXPECT_TRUE((*decoder)->gpu_reads_host());
  auto decoded =
      (*decoder)->plan_gpu(SampleContext{}, (*decoder)->args(), png.shape(), png.dtype(), &png);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->out_shape, Shape({7, 13, 3}));
  ASSERT_TRUE(decoded->step.host.defined());
  auto on_cpu = run_op("decoders.image", {}, {png});
  ASSERT_TRUE(on_cpu.ok());
  EXPECT_TRUE(decoded->step.host.equals(*on_cpu));
  auto garbage =
      (*decoder)->plan_gpu(SampleContext{}, (*decoder)->args(), Shape{3}, DType::kU8, &in);
  EXPECT_FALSE(garbage.ok());
  EXPECT_FALSE((*decoder)
                   ->plan_gpu(SampleContext{}, (*decoder)->args(), png.shape(), DType::kU8, nullptr)
                   .ok());
  covered.push_back("decoders.image");
  // The random-crop decoder draws run()'s window; what the GPU cannot decode is decoded here.
  const ArgMap crop_args{{"random_area", std::vector<double>{0.2, 0.5}}};
  auto crop_decoder = create_operator("decoders.image_random_crop", crop_args);
  ASSERT_TRUE(crop_decoder.ok()) << crop_decoder.status().to_string();
  SampleContext seeded;
  seeded.seed = 3;
  auto window =
      (*crop_decoder)->plan_gpu(seeded, (*crop_decoder)->args(), png.shape(), png.dtype(), &png);
  ASSERT_TRUE(window.ok()) << window.status().to_string();
  auto cut_on_cpu = run_op("decoders.image_random_crop", crop_args, {png}, {}, 3);
  ASSERT_TRUE(cut_on_cpu.ok());
  EXPECT_EQ(window->out_shape, cut_on_cpu->shape());
  EXPECT_TRUE(window->step.host.equals(*cut_on_cpu));
  covered.push_back("decoders.image_random_crop");

  auto crop = create_operator("random_resized_crop", {{"size", std::vector<int64_t>{9, 11}}});
  SampleContext ctx;
  ctx.seed = 1;
  auto a = (*crop)->plan_gpu(ctx, (*crop)->args(), Shape{300, 400, 3}, DType::kU8, nullptr);
  ctx.seed = 2;
  auto b = (*crop)->plan_gpu(ctx, (*crop)->args(), Shape{300, 400, 3}, DType::kU8, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->step.window.width * 1000 + a->step.window.x,
            b->step.window.width * 1000 + b->step.window.x);
  // The list the messages give is the list that has a GPU form.
  for (std::string_view name : gpu_operator_names()) {
    EXPECT_NE(std::find(covered.begin(), covered.end(), name), covered.end()) << name;
  }
  auto coin = create_operator("random.coin_flip", {});
  ASSERT_TRUE(coin.ok()) << coin.status().to_string();
  EXPECT_FALSE((*coin)->supports_gpu());
}

TEST(OperatorsTest, GpuPlansRejectWhatTheKernelsCannotTake) {
  auto resize = create_operator("resize", {{"resize_x", int64_t{8}}});
  ASSERT_TRUE(resize.ok());
  auto five =
      (*resize)->plan_gpu(SampleContext{}, (*resize)->args(), Shape{4, 4, 5}, DType::kU8, nullptr);
  ASSERT_FALSE(five.ok());
  EXPECT_THAT(five.status().message(),
              HasSubstr("operator resize: on the GPU, images have at most 4 channels"));
  auto flip = create_operator("flip", {});
  auto floats =
      (*flip)->plan_gpu(SampleContext{}, (*flip)->args(), Shape{4, 4, 3}, DType::kF32, nullptr);
  ASSERT_FALSE(floats.ok());
  EXPECT_THAT(floats.status().message(), HasSubstr("operator flip: expected uint8 pixels"));
  auto cmn = create_operator("crop_mirror_normalize", {{"crop", std::vector<int64_t>{9, 9}}});
  auto small =
      (*cmn)->plan_gpu(SampleContext{}, (*cmn)->args(), Shape{4, 4, 3}, DType::kU8, nullptr);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("crop_mirror_normalize"));
  // The per-sample checks of the CPU forms hold on the GPU too.
  auto blur = create_operator("gaussian_blur", {});
  OpArgs args = (*blur)->args();
  args.set_sample_value("sigma", 0.0);
  auto flat = (*blur)->plan_gpu(SampleContext{}, args, Shape{4, 4, 3}, DType::kU8, nullptr);
  ASSERT_FALSE(flat.ok());
  EXPECT_THAT(flat.status().message(), HasSubstr("sigma must be in (0, 100], got 0"));
  auto pad = create_operator("pad", {{"align", int64_t{2}}});
  auto five_floats =
      (*pad)->plan_gpu(SampleContext{}, (*pad)->args(), Shape{4, 4, 5}, DType::kF32, nullptr);
  ASSERT_FALSE(five_floats.ok());
  EXPECT_THAT(five_floats.status().message(),
              HasSubstr("operator pad: on the GPU, images have at most 4 channels"));
  auto cast = create_operator("cast", {{"dtype", std::string("uint8")}});
  auto halves =
      (*cast)->plan_gpu(SampleContext{}, (*cast)->args(), Shape{4, 4, 3}, DType::kF16, nullptr);
  ASSERT_FALSE(halves.ok());
  EXPECT_THAT(halves.status().message(), HasSubstr("expected uint8, int32 or float32 input"));
}

}  // namespace
}  // namespace kiln::pipeline
