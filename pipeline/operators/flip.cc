// SPDX-License-Identifier: Apache-2.0
// flip: mirrors each HWC image left-right and/or upside-down, per sample.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/crop_flip.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Flip final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("flip", in, false));
    const bool horizontal = args.get_int("horizontal") != 0;
    const bool vertical = args.get_int("vertical") != 0;
    if (!horizontal && !vertical) {
      outputs->push_back(in);
      return Status();
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(in.dtype(), in.shape()));
    kernels::flip_hwc(in.view(), out.view(), horizontal, vertical);
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_gpu_image("flip", shape, dtype));
    GpuSamplePlan plan = same_size_plan(shape, dtype);
    plan.step.mirror = args.get_int("horizontal") != 0;
    plan.step.flip_vertical = args.get_int("vertical") != 0;
    return plan;
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.crop_flip(images, steps);
  }
};

}  // namespace

const OperatorSchema& flip_schema() {
  static const OperatorSchema schema{
      "flip",
      "mirrors HWC images horizontally and/or vertically",
      {"images"},
      {"images"},
      {
          {"horizontal", ArgType::kInt, int64_t{1}, "1: mirror left-right", true},
          {"vertical", ArgType::kInt, int64_t{0}, "1: mirror upside-down", true},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_flip(OpArgs args) {
  return std::unique_ptr<Operator>(new Flip(std::move(args)));
}

}  // namespace kiln::pipeline::detail
