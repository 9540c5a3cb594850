// SPDX-License-Identifier: Apache-2.0
// rotate: turns uint8 images counter-clockwise about their centre by a per-sample angle.
#include <fmt/format.h>

#include <cmath>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/warp.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Rotate final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("rotate", in, true));
    KILN_ASSIGN_OR_RETURN(kernels::GpuStep step, plan(args, in.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          kernels::allocate_uninitialized(
                              DType::kU8, Shape{step.out_height, step.out_width, in.shape()[2]}));
    kernels::warp_affine_u8(in.view(), out.view(), step.affine, step.linear, step.fill);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("rotate", shape, dtype));
    KILN_ASSIGN_OR_RETURN(kernels::GpuStep step, plan(args, shape));
    const Shape out{step.out_height, step.out_width, shape[2]};
    return GpuSamplePlan{std::move(step), out, DType::kU8};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.warp(images, steps);
  }

 private:
  // The output size and the warp of one image: the same on either device.
  static Result<kernels::GpuStep> plan(const OpArgs& args, const Shape& in) {
    const double angle = args.get_float("angle");
    if (!std::isfinite(angle)) {
      return invalid_argument_error(
          fmt::format("operator rotate: angle must be finite, got {}", angle));
    }
    const int64_t h = in[0], w = in[1];
    const auto& size = args.get_ints("size");
    std::array<int64_t, 2> out_size{h, w};
    if (!size.empty()) {
      out_size = {size[0], size[1]};
    } else if (!args.get_bool("keep_size")) {
      out_size = kernels::rotated_bounds(angle, h, w);
    }
    kernels::GpuStep step{kernels::Window{0, 0, h, w}, out_size[0], out_size[1]};
    step.affine = kernels::rotation(angle, h, w, out_size[0], out_size[1]);
    step.linear = args.get_string("interp_type") == "linear";
    step.fill = static_cast<uint8_t>(args.get_int("fill_value"));
    return step;
  }
};

}  // namespace

const OperatorSchema& rotate_schema() {
  static const OperatorSchema schema{
      "rotate",
      "rotates images counter-clockwise about their centre",
      {"images"},
      {"images"},
      {
          {"angle", ArgType::kFloat, std::nullopt, "degrees, counter-clockwise", true},
          {"keep_size", ArgType::kBool, false,
           "true: output the input's size; false: the bounding box of the rotated image"},
          {"size", ArgType::kIntList, std::vector<int64_t>{},
           "output [height, width] (overrides keep_size)"},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest or linear"},
          {"fill_value", ArgType::kInt, int64_t{0}, "value of the uncovered corners"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_rotate(OpArgs args) {
  constexpr std::string_view kOp = "operator rotate";
  KILN_RETURN_IF_ERROR(check_warp_args(kOp, args));
  return std::unique_ptr<Operator>(new Rotate(std::move(args)));
}

}  // namespace kiln::pipeline::detail
