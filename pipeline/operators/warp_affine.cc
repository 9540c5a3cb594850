// SPDX-License-Identifier: Apache-2.0
// warp_affine: resamples uint8 images through a 2x3 affine matrix (output -> input by default).
#include <fmt/format.h>

#include <cmath>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/warp.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class WarpAffine final : public Operator {
 public:
  WarpAffine(OpArgs args, kernels::Affine out_to_in, bool linear)
      : Operator(std::move(args)), out_to_in_(out_to_in), linear_(linear) {}

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("warp_affine", in, true));
    const auto& size = args.get_ints("size");
    const int64_t h = size.empty() ? in.shape()[0] : size[0];
    const int64_t w = size.empty() ? in.shape()[1] : size[1];
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          kernels::allocate_uninitialized(DType::kU8, Shape{h, w, in.shape()[2]}));
    kernels::warp_affine_u8(in.view(), out.view(), out_to_in_, linear_,
                            static_cast<uint8_t>(args.get_int("fill_value")));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("warp_affine", shape, dtype));
    const auto& size = args.get_ints("size");
    const int64_t h = size.empty() ? shape[0] : size[0];
    const int64_t w = size.empty() ? shape[1] : size[1];
    kernels::GpuStep step{kernels::Window{0, 0, shape[0], shape[1]}, h, w};
    step.affine = out_to_in_;
    step.linear = linear_;
    step.fill = static_cast<uint8_t>(args.get_int("fill_value"));
    return GpuSamplePlan{std::move(step), Shape{h, w, shape[2]}, DType::kU8};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.warp(images, steps);
  }

 private:
  kernels::Affine out_to_in_;
  bool linear_;
};

}  // namespace

const OperatorSchema& warp_affine_schema() {
  static const OperatorSchema schema{
      "warp_affine",
      "resamples images through a 2x3 affine matrix, pixel centres at +0.5",
      {"images"},
      {"images"},
      {
          {"matrix", ArgType::kFloatList, std::nullopt,
           "[m00, m01, m02, m10, m11, m12]: (x, y) -> (m00 x + m01 y + m02, m10 x + m11 y + m12)"},
          {"inverse_map", ArgType::kBool, true,
           "true: the matrix maps output to input coordinates; false: input to output"},
          {"size", ArgType::kIntList, std::vector<int64_t>{},
           "output [height, width]; empty: the input's"},
          {"interp_type", ArgType::kString, std::string("linear"), "nearest or linear"},
          {"fill_value", ArgType::kInt, int64_t{0}, "value of pixels mapped outside the input"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_warp_affine(OpArgs args) {
  constexpr std::string_view kOp = "operator warp_affine";
  const auto& m = args.get_floats("matrix");
  if (m.size() != 6) {
    return invalid_argument_error(
        fmt::format("{}: matrix must have 6 values (2x3, row-major), got {}", kOp, m.size()));
  }
  kernels::Affine a{m[0], m[1], m[2], m[3], m[4], m[5]};
  if (!args.get_bool("inverse_map")) {
    const double det = a[0] * a[4] - a[1] * a[3];
    if (std::abs(det) < 1e-12) {
      return invalid_argument_error(
          fmt::format("{}: matrix [{}] is not invertible", kOp, fmt::join(m, ", ")));
    }
    const double i0 = a[4] / det, i1 = -a[1] / det, i3 = -a[3] / det, i4 = a[0] / det;
    a = {i0, i1, -(i0 * a[2] + i1 * a[5]), i3, i4, -(i3 * a[2] + i4 * a[5])};
  }
  KILN_RETURN_IF_ERROR(check_warp_args(kOp, args));
  const bool linear = args.get_string("interp_type") == "linear";
  return std::unique_ptr<Operator>(new WarpAffine(std::move(args), a, linear));
}

}  // namespace kiln::pipeline::detail
