// SPDX-License-Identifier: Apache-2.0
// crop_mirror_normalize: crop + mirror + (x - mean) / std + HWC/CHW + float32/float16/uint8, fused.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/normalize.h"
#include "pipeline/operators/crop_window.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class CropMirrorNormalize final : public Operator {
 public:
  CropMirrorNormalize(OpArgs args, kernels::Layout layout, DType dtype)
      : Operator(std::move(args)), layout_(layout), dtype_(dtype) {
    for (double v : this->args().get_floats("mean")) mean_.push_back(static_cast<float>(v));
    for (double v : this->args().get_floats("std")) std_.push_back(static_cast<float>(v));
  }

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("crop_mirror_normalize", in, true));
    KILN_ASSIGN_OR_RETURN(kernels::Window window, crop_window(args, in.shape()));
    const int64_t c = in.shape()[2];
    Shape shape = layout_ == kernels::Layout::kHWC ? Shape{window.height, window.width, c}
                                                   : Shape{c, window.height, window.width};
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(dtype_, shape));
    kernels::crop_mirror_normalize_u8(in.view(), out.view(), window, args.get_int("mirror") != 0,
                                      mean_, std_, layout_);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("crop_mirror_normalize", shape, dtype));
    KILN_ASSIGN_OR_RETURN(kernels::Window window, crop_window(args, shape));
    kernels::GpuStep step{window, window.height, window.width};
    step.mirror = args.get_int("mirror") != 0;
    const int64_t c = shape[2];
    return GpuSamplePlan{step,
                         layout_ == kernels::Layout::kHWC ? Shape{window.height, window.width, c}
                                                          : Shape{c, window.height, window.width},
                         dtype_};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.crop_mirror_normalize(images, steps, mean_, std_, layout_, dtype_);
  }

 private:
  // Checks mean and std against the image's channels; the window to read.
  Result<kernels::Window> crop_window(const OpArgs& args, const Shape& in) const {
    const int64_t h = in[0], w = in[1], c = in[2];
    if (mean_.size() != 1 && static_cast<int64_t>(mean_.size()) != c) {
      return invalid_argument_error(
          fmt::format("operator crop_mirror_normalize: mean has {} values for a {}-channel image",
                      mean_.size(), c));
    }
    if (std_.size() != 1 && static_cast<int64_t>(std_.size()) != c) {
      return invalid_argument_error(
          fmt::format("operator crop_mirror_normalize: std has {} values for a {}-channel image",
                      std_.size(), c));
    }
    const auto& crop = args.get_ints("crop");
    kernels::Window window{0, 0, h, w};
    if (!crop.empty()) {
      KILN_ASSIGN_OR_RETURN(
          window, anchored_window("crop_mirror_normalize", h, w, crop[0], crop[1],
                                  args.get_float("crop_pos_x"), args.get_float("crop_pos_y")));
    }
    return window;
  }

  kernels::Layout layout_;
  DType dtype_;
  std::vector<float> mean_;
  std::vector<float> std_;
};

}  // namespace

const OperatorSchema& crop_mirror_normalize_schema() {
  static const OperatorSchema schema{
      "crop_mirror_normalize",
      "crops, mirrors, normalizes and lays out HWC uint8 images in one pass",
      {"images"},
      {"images"},
      {
          {"crop", ArgType::kIntList, std::vector<int64_t>{},
           "window size [height, width]; empty: the whole image"},
          {"crop_pos_x", ArgType::kFloat, 0.5, "horizontal position in [0, 1] (0.5: centre)", true},
          {"crop_pos_y", ArgType::kFloat, 0.5, "vertical position in [0, 1] (0.5: centre)", true},
          {"mirror", ArgType::kInt, int64_t{0}, "1: mirror left-right", true},
          {"mean", ArgType::kFloatList, std::vector<double>{0.0}, "per-channel (or one) mean"},
          {"std", ArgType::kFloatList, std::vector<double>{1.0}, "per-channel (or one) std"},
          {"output_layout", ArgType::kString, std::string("CHW"), "CHW or HWC"},
          {"dtype", ArgType::kString, std::string("float32"), "float32, float16 or uint8"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_crop_mirror_normalize(OpArgs args) {
  constexpr std::string_view kOp = "operator crop_mirror_normalize";
  const auto& crop = args.get_ints("crop");
  if (!crop.empty() && (crop.size() != 2 || crop[0] <= 0 || crop[1] <= 0)) {
    return invalid_argument_error(
        fmt::format("{}: crop must be empty or [height, width] > 0, "
                    "got [{}]",
                    kOp, fmt::join(crop, ",")));
  }
  for (std::string_view name : {"mean", "std"}) {
    if (args.get_floats(name).empty()) {
      return invalid_argument_error(fmt::format("{}: {} must not be empty", kOp, name));
    }
  }
  for (double s : args.get_floats("std")) {
    if (s == 0.0) return invalid_argument_error(fmt::format("{}: std must not contain 0", kOp));
  }
  const std::string& layout = args.get_string("output_layout");
  if (layout != "CHW" && layout != "HWC") {
    return invalid_argument_error(
        fmt::format("{}: output_layout \"{}\": expected CHW or HWC", kOp, layout));
  }
  const std::string& dtype = args.get_string("dtype");
  if (dtype != "float32" && dtype != "float16" && dtype != "uint8") {
    return invalid_argument_error(
        fmt::format("{}: dtype \"{}\": expected float32, float16 or uint8", kOp, dtype));
  }
  return std::unique_ptr<Operator>(new CropMirrorNormalize(
      std::move(args), layout == "CHW" ? kernels::Layout::kCHW : kernels::Layout::kHWC,
      dtype == "float32"   ? DType::kF32
      : dtype == "float16" ? DType::kF16
                           : DType::kU8));
}

}  // namespace kiln::pipeline::detail
