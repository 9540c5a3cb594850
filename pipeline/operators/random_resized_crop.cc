// SPDX-License-Identifier: Apache-2.0
// random_resized_crop: a random area/aspect window of each image, resized to a fixed size.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/resize.h"
#include "pipeline/operators/crop_window.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class RandomResizedCrop final : public Operator {
 public:
  RandomResizedCrop(OpArgs args, RandomCropParams params, kernels::Interp interp)
      : Operator(std::move(args)), params_(params), interp_(interp) {}

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("random_resized_crop", in, true));
    const kernels::Window window = draw_window(ctx, args, in.shape()[0], in.shape()[1]);
    const auto& size = args.get_ints("size");
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(
                                          DType::kU8, Shape{size[0], size[1], in.shape()[2]}));
    kernels::resize_window_u8(in.view(), window, out.view(), interp_);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("random_resized_crop", shape, dtype));
    const auto& size = args.get_ints("size");
    return GpuSamplePlan{{draw_window(ctx, args, shape[0], shape[1]), size[0], size[1]},
                         Shape{size[0], size[1], shape[2]},
                         DType::kU8};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.resize(images, steps, interp_);
  }

 private:
  kernels::Window draw_window(const SampleContext& ctx, const OpArgs& args, int64_t h,
                              int64_t w) const {
    SampleRng rng(ctx.seed);
    kernels::Window window = random_resized_crop_window(h, w, params_, rng);
    // A fixed position (rocAL's CropResizeFixed) replaces the random one; the size stays.
    const double pos_x = args.get_float("crop_pos_x"), pos_y = args.get_float("crop_pos_y");
    if (pos_x >= 0.0) window.x = std::llround(std::min(pos_x, 1.0) * (w - window.width));
    if (pos_y >= 0.0) window.y = std::llround(std::min(pos_y, 1.0) * (h - window.height));
    return window;
  }

  RandomCropParams params_;
  kernels::Interp interp_;
};

}  // namespace

const OperatorSchema& random_resized_crop_schema() {
  static const OperatorSchema schema{
      "random_resized_crop",
      "takes a random area/aspect window of each image and resizes it (torchvision's "
      "RandomResizedCrop)",
      {"images"},
      {"images"},
      {
          {"size", ArgType::kIntList, std::nullopt, "output size [height, width]"},
          {"random_area", ArgType::kFloatList, std::vector<double>{0.08, 1.0},
           "range of the window's area as a fraction of the image"},
          {"random_aspect_ratio", ArgType::kFloatList, std::vector<double>{3.0 / 4.0, 4.0 / 3.0},
           "range of the window's width / height (drawn log-uniformly)"},
          {"num_attempts", ArgType::kInt, int64_t{10},
           "draws before falling back to a centre crop"},
          {"crop_pos_x", ArgType::kFloat, -1.0,
           "fixed horizontal position of the window in [0, 1]; -1: random", true},
          {"crop_pos_y", ArgType::kFloat, -1.0,
           "fixed vertical position of the window in [0, 1]; -1: random", true},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest, linear or cubic"},
          {"antialias", ArgType::kBool, true, "low-pass filter when downscaling (as PIL)"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_random_resized_crop(OpArgs args) {
  constexpr std::string_view kOp = "operator random_resized_crop";
  const auto& size = args.get_ints("size");
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0) {
    return invalid_argument_error(
        fmt::format("{}: size must be [height, width] > 0, got [{}]", kOp, fmt::join(size, ",")));
  }
  const auto& area = args.get_floats("random_area");
  const auto& aspect = args.get_floats("random_aspect_ratio");
  if (area.size() != 2 || !(area[0] > 0.0) || !(area[0] <= area[1])) {
    return invalid_argument_error(fmt::format(
        "{}: random_area must be [lo, hi] with 0 < lo <= hi, got [{}]", kOp, fmt::join(area, ",")));
  }
  if (aspect.size() != 2 || !(aspect[0] > 0.0) || !(aspect[0] <= aspect[1])) {
    return invalid_argument_error(
        fmt::format("{}: random_aspect_ratio must be [lo, hi] with 0 < lo <= hi, got [{}]", kOp,
                    fmt::join(aspect, ",")));
  }
  KILN_ASSIGN_OR_RETURN(kernels::Interp interp, parse_interp(kOp, args.get_string("interp_type"),
                                                             args.get_bool("antialias")));
  RandomCropParams params{area[0], std::min(area[1], 1.0), aspect[0], aspect[1],
                          std::max<int64_t>(args.get_int("num_attempts"), 1)};
  return std::unique_ptr<Operator>(new RandomResizedCrop(std::move(args), params, interp));
}

}  // namespace kiln::pipeline::detail
