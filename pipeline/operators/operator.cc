// SPDX-License-Identifier: Apache-2.0
// The operator registry (filled from operator_list.inc) and seed mixing.
#include "pipeline/operators/operator.h"

#include <fmt/format.h>

#include <array>

#include "pipeline/operators/operators.h"

namespace kiln::pipeline {
namespace {

using Factory = Result<std::unique_ptr<Operator>> (*)(OpArgs);

struct Entry {
  const OperatorSchema* schema;
  Factory make;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
#define KILN_PIPELINE_OPERATOR(id) {&detail::id##_schema(), &detail::make_##id},
#include "pipeline/operators/operator_list.inc"
#undef KILN_PIPELINE_OPERATOR
  };
  return entries;
}

}  // namespace

uint64_t mix_seed(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x6a09e667f3bcc909ull;
  for (uint64_t v : values) {
    SampleRng rng(h ^ v);
    h = rng.next();
  }
  return h;
}

std::span<const OperatorSchema* const> operator_schemas() {
  static const std::vector<const OperatorSchema*> schemas = [] {
    std::vector<const OperatorSchema*> out;
    for (const Entry& e : registry()) out.push_back(e.schema);
    return out;
  }();
  return schemas;
}

const OperatorSchema* find_operator_schema(std::string_view name) {
  for (const Entry& e : registry()) {
    if (e.schema->name == name) return e.schema;
  }
  return nullptr;
}

Result<std::unique_ptr<Operator>> create_operator(std::string_view name, const ArgMap& args) {
  for (const Entry& e : registry()) {
    if (e.schema->name != name) continue;
    KILN_ASSIGN_OR_RETURN(OpArgs validated, validate_args(*e.schema, args));
    return e.make(std::move(validated));
  }
  return not_found_error(fmt::format("pipeline operator \"{}\" does not exist", name));
}

namespace detail {

Status check_warp_args(std::string_view op, const OpArgs& args) {
  const auto& size = args.get_ints("size");
  if (!size.empty() && (size.size() != 2 || size[0] <= 0 || size[1] <= 0)) {
    return invalid_argument_error(fmt::format(
        "{}: size must be empty or [height, width] > 0, got [{}]", op, fmt::join(size, ",")));
  }
  const std::string& interp = args.get_string("interp_type");
  if (interp != "nearest" && interp != "linear") {
    return invalid_argument_error(
        fmt::format("{}: interp_type \"{}\": expected nearest or linear", op, interp));
  }
  const int64_t fill = args.get_int("fill_value");
  if (fill < 0 || fill > 255) {
    return invalid_argument_error(
        fmt::format("{}: fill_value must be in [0, 255], got {}", op, fill));
  }
  return Status();
}

Status check_image(std::string_view op, const Tensor& image, bool u8_only) {
  return check_image(op, image.shape(), image.dtype(), u8_only);
}

Status check_image(std::string_view op, const Shape& shape, DType dtype, bool u8_only) {
  if (shape.rank() != 3 || shape.numel() == 0) {
    return invalid_argument_error(
        fmt::format("operator {}: expected a non-empty HWC image, got {}", op, shape.to_string()));
  }
  if (u8_only && dtype != DType::kU8) {
    return invalid_argument_error(
        fmt::format("operator {}: expected uint8 pixels, got {}", op, dtype_name(dtype)));
  }
  return Status();
}

Status check_gpu_image(std::string_view op, const Shape& shape, DType dtype) {
  KILN_RETURN_IF_ERROR(check_image(op, shape, dtype, true));
  if (shape[2] > kernels::cuda_max_channels()) {
    return invalid_argument_error(
        fmt::format("operator {}: on the GPU, images have at most {} channels, got {}", op,
                    kernels::cuda_max_channels(), shape.to_string()));
  }
  return Status();
}

GpuSamplePlan same_size_plan(const Shape& shape, DType out_dtype) {
  return GpuSamplePlan{
      {kernels::Window{0, 0, shape[0], shape[1]}, shape[0], shape[1]}, shape, out_dtype};
}

Status check_boxes(std::string_view op, const Tensor& boxes) {
  if (boxes.dtype() != DType::kF32 || boxes.rank() != 2 || boxes.shape()[1] != 4) {
    return invalid_argument_error(
        fmt::format("operator {}: expected boxes as a [N, 4] float32 tensor, got {} {}", op,
                    dtype_name(boxes.dtype()), boxes.shape().to_string()));
  }
  return Status();
}

Status check_rgb(std::string_view op, const Tensor& in) {
  return check_rgb(op, in.shape(), in.dtype());
}

Status check_rgb(std::string_view op, const Shape& shape, DType dtype) {
  KILN_RETURN_IF_ERROR(check_image(op, shape, dtype, true));
  if (shape[2] != 3) {
    return invalid_argument_error(fmt::format(
        "operator {}: expected 3-channel (RGB/BGR) images, got {}", op, shape.to_string()));
  }
  return Status();
}

Result<kernels::Interp> parse_interp(std::string_view op, std::string_view name, bool antialias) {
  if (name == "nearest") return kernels::Interp::kNearest;
  if (name == "linear") return antialias ? kernels::Interp::kAntialiased : kernels::Interp::kLinear;
  if (name == "cubic") {
    return antialias ? kernels::Interp::kCubicAntialiased : kernels::Interp::kCubic;
  }
  return invalid_argument_error(
      fmt::format("{}: interp_type \"{}\": expected nearest, linear or cubic", op, name));
}

}  // namespace detail

std::span<const std::string_view> gpu_operator_names() {
  static constexpr std::string_view kNames[] = {"decoders.image",
                                                "decoders.image_random_crop",
                                                "resize",
                                                "random_resized_crop",
                                                "crop",
                                                "flip",
                                                "crop_mirror_normalize",
                                                "brightness_contrast",
                                                "gamma",
                                                "hsv",
                                                "color_twist",
                                                "rotate",
                                                "warp_affine",
                                                "gaussian_blur",
                                                "noise.gaussian",
                                                "noise.salt_and_pepper",
                                                "pad",
                                                "cast"};
  return kNames;
}

Result<GpuSamplePlan> Operator::plan_gpu(const SampleContext&, const OpArgs&, const Shape&, DType,
                                         const Tensor*) const {
  return internal_error(fmt::format("operator {} has no GPU form", schema().name));
}

Result<kernels::GpuImages> Operator::run_gpu(kernels::GpuStream&, const kernels::GpuImages&,
                                             std::span<const Tensor>,
                                             std::span<const kernels::GpuStep>) const {
  return internal_error(fmt::format("operator {} has no GPU form", schema().name));
}

Status ReaderOperator::run(const SampleContext&, const OpArgs&, std::span<const Tensor>,
                           std::vector<Tensor>*) const {
  return internal_error(
      fmt::format("operator {}: readers are driven by the executor", schema().name));
}

}  // namespace kiln::pipeline
