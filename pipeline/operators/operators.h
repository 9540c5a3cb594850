// SPDX-License-Identifier: Apache-2.0
// Declarations of every operator's schema and factory, generated from operator_list.inc.
#pragma once

#include <optional>

#include "pipeline/kernels/color.h"
#include "pipeline/kernels/resize.h"
#include "pipeline/operators/operator.h"

namespace kiln::pipeline::detail {

#define KILN_PIPELINE_OPERATOR(id)     \
  const OperatorSchema& id##_schema(); \
  Result<std::unique_ptr<Operator>> make_##id(OpArgs args);
#include "pipeline/operators/operator_list.inc"
#undef KILN_PIPELINE_OPERATOR

// Ok when `image` is a non-empty [H, W, C] tensor (uint8 when `u8_only`); else an error naming
// `op`.
Status check_image(std::string_view op, const Tensor& image, bool u8_only);
Status check_image(std::string_view op, const Shape& shape, DType dtype, bool u8_only);
// check_image for a GPU operator: uint8, and no more channels than the GPU kernels take.
Status check_gpu_image(std::string_view op, const Shape& shape, DType dtype);
// The GPU plan of an operator that keeps each image's size: the whole image in, the same shape
// out, of `out_dtype`.
GpuSamplePlan same_size_plan(const Shape& shape, DType out_dtype);
// Checks the arguments rotate and warp_affine share: size ([] or [height, width] > 0),
// interp_type (nearest or linear) and fill_value (0 to 255). Errors name `op`.
Status check_warp_args(std::string_view op, const OpArgs& args);

// Ok when `boxes` is a [N, 4] float32 tensor (N may be 0); else an error naming `op`.
Status check_boxes(std::string_view op, const Tensor& boxes);

// Ok when `image` is a non-empty [H, W, 3] uint8 tensor; else an error naming `op`.
Status check_rgb(std::string_view op, const Tensor& image);
Status check_rgb(std::string_view op, const Shape& shape, DType dtype);

// A colour operator, on either device: every value through a per-sample 256-entry table (any
// channel count), or every RGB pixel through a per-sample 3x3 matrix and offset. A subclass says
// how its arguments make the one or the other.
class ColorOperator : public Operator {
 public:
  using Operator::Operator;
  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const final;
  bool supports_gpu() const final { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape& shape,
                                 DType dtype, const Tensor* host) const final;
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor> host,
                                     std::span<const kernels::GpuStep> steps) const final;

 protected:
  // The table, or (when it is empty) the matrix.
  struct ColorMap {
    std::optional<kernels::Lut> lut;
    kernels::ColorMatrix matrix;
  };
  // Whether the operator maps by table; it must give the same kind for every sample.
  virtual bool by_table() const = 0;
  virtual Result<ColorMap> color_map(const OpArgs& args) const = 0;
};

// "nearest", "linear" or "cubic" (antialiased when downscaling if `antialias`); else an error
// naming `op`.
Result<kernels::Interp> parse_interp(std::string_view op, std::string_view name, bool antialias);

}  // namespace kiln::pipeline::detail
