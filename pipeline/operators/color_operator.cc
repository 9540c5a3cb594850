// SPDX-License-Identifier: Apache-2.0
// The colour operators' shared body: a per-sample table or matrix, applied on the CPU or the GPU.
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/color.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {

Status ColorOperator::run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
                          std::vector<Tensor>* outputs) const {
  const Tensor& in = inputs[0];
  KILN_RETURN_IF_ERROR(by_table() ? check_image(schema().name, in, true)
                                  : check_rgb(schema().name, in));
  KILN_ASSIGN_OR_RETURN(ColorMap map, color_map(args));
  KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(DType::kU8, in.shape()));
  if (map.lut) {
    kernels::apply_lut_u8(in.view(), out.view(), *map.lut);
  } else {
    kernels::color_matrix_u8(in.view(), out.view(), map.matrix);
  }
  outputs->push_back(std::move(out));
  return Status();
}

Result<GpuSamplePlan> ColorOperator::plan_gpu(const SampleContext&, const OpArgs& args,
                                              const Shape& shape, DType dtype,
                                              const Tensor*) const {
  KILN_RETURN_IF_ERROR(by_table() ? check_gpu_image(schema().name, shape, dtype)
                                  : check_rgb(schema().name, shape, dtype));
  KILN_ASSIGN_OR_RETURN(ColorMap map, color_map(args));
  GpuSamplePlan plan = same_size_plan(shape, DType::kU8);
  if (map.lut) {
    plan.step.lut.assign(map.lut->begin(), map.lut->end());
  } else {
    plan.step.matrix = map.matrix;
  }
  return plan;
}

Result<kernels::GpuImages> ColorOperator::run_gpu(kernels::GpuStream& stream,
                                                  const kernels::GpuImages& images,
                                                  std::span<const Tensor>,
                                                  std::span<const kernels::GpuStep> steps) const {
  return by_table() ? stream.apply_lut(images, steps) : stream.color_matrix(images, steps);
}

}  // namespace kiln::pipeline::detail
