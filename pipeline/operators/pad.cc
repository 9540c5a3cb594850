// SPDX-License-Identifier: Apache-2.0
// pad: grows HWC images (uint8 or float32) at the bottom and right to a size and/or alignment.
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/warp.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

int64_t round_up(int64_t v, int64_t align) {
  return align <= 1 ? v : (v + align - 1) / align * align;
}

// The padded shape of an image of `shape` and `dtype`, or why it cannot be padded.
Result<Shape> padded_shape(const OpArgs& args, const Shape& shape, DType dtype) {
  KILN_RETURN_IF_ERROR(check_image("pad", shape, dtype, false));
  if (dtype != DType::kU8 && dtype != DType::kF32) {
    return invalid_argument_error(
        fmt::format("operator pad: expected uint8 or float32 images, got {}", dtype_name(dtype)));
  }
  const auto& size = args.get_ints("size");
  const int64_t align = args.get_int("align");
  int64_t h = shape[0], w = shape[1];
  if (!size.empty()) {
    h = std::max(h, size[0]);
    w = std::max(w, size[1]);
  }
  return Shape{round_up(h, align), round_up(w, align), shape[2]};
}

class Pad final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_ASSIGN_OR_RETURN(Shape shape, padded_shape(args, in.shape(), in.dtype()));
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(in.dtype(), shape));
    kernels::pad_hwc(in.view(), out.view(), args.get_float("fill_value"));
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_ASSIGN_OR_RETURN(Shape out, padded_shape(args, shape, dtype));
    if (shape[2] > kernels::cuda_max_channels()) {
      return invalid_argument_error(
          fmt::format("operator pad: on the GPU, images have at most {} channels, got {}",
                      kernels::cuda_max_channels(), shape.to_string()));
    }
    return GpuSamplePlan{{kernels::Window{0, 0, shape[0], shape[1]}, out[0], out[1]}, out, dtype};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.pad(images, steps, args().get_float("fill_value"));
  }
};

}  // namespace

const OperatorSchema& pad_schema() {
  static const OperatorSchema schema{
      "pad",
      "pads images at the bottom and right to at least a size, then to a multiple of align",
      {"images"},
      {"images"},
      {
          {"size", ArgType::kIntList, std::vector<int64_t>{},
           "minimum output [height, width]; empty: the input's"},
          {"align", ArgType::kInt, int64_t{1}, "round height and width up to a multiple of this"},
          {"fill_value", ArgType::kFloat, 0.0, "value of the added pixels"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_pad(OpArgs args) {
  const auto& size = args.get_ints("size");
  if (!size.empty() && (size.size() != 2 || size[0] <= 0 || size[1] <= 0)) {
    return invalid_argument_error(fmt::format(
        "operator pad: size must be empty or [height, width] > 0, got [{}]", fmt::join(size, ",")));
  }
  if (args.get_int("align") < 1) {
    return invalid_argument_error(
        fmt::format("operator pad: align must be >= 1, got {}", args.get_int("align")));
  }
  return std::unique_ptr<Operator>(new Pad(std::move(args)));
}

}  // namespace kiln::pipeline::detail
