// SPDX-License-Identifier: Apache-2.0
// cast: converts tensors between uint8, int32 and float32 (float to integer rounds, saturates).
#include <fmt/format.h>

#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/warp.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Cast final : public Operator {
 public:
  Cast(OpArgs args, DType dtype) : Operator(std::move(args)), dtype_(dtype) {}

  Status run(const SampleContext&, const OpArgs&, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_input(in.dtype()));
    if (in.dtype() == dtype_) {
      outputs->push_back(in);
      return Status();
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(dtype_, in.shape()));
    kernels::cast(in.view(), out.view());
    outputs->push_back(std::move(out));
    return Status();
  }

  bool supports_gpu() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext&, const OpArgs&, const Shape& shape,
                                 DType dtype, const Tensor*) const override {
    KILN_RETURN_IF_ERROR(check_input(dtype));
    return GpuSamplePlan{{}, shape, dtype_};
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages& images,
                                     std::span<const Tensor>,
                                     std::span<const kernels::GpuStep>) const override {
    return stream.cast(images, dtype_);
  }

 private:
  static Status check_input(DType dtype) {
    if (dtype != DType::kU8 && dtype != DType::kI32 && dtype != DType::kF32) {
      return invalid_argument_error(fmt::format(
          "operator cast: expected uint8, int32 or float32 input, got {}", dtype_name(dtype)));
    }
    return Status();
  }

  DType dtype_;
};

}  // namespace

const OperatorSchema& cast_schema() {
  static const OperatorSchema schema{
      "cast",
      "converts elements to another type; float to integer rounds and saturates",
      {"input"},
      {"output"},
      {{"dtype", ArgType::kString, std::nullopt, "uint8, int32 or float32"}}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_cast(OpArgs args) {
  const std::string& name = args.get_string("dtype");
  DType dtype;
  if (name == "uint8") {
    dtype = DType::kU8;
  } else if (name == "int32") {
    dtype = DType::kI32;
  } else if (name == "float32") {
    dtype = DType::kF32;
  } else {
    return invalid_argument_error(
        fmt::format("operator cast: dtype \"{}\": expected uint8, int32 or float32", name));
  }
  return std::unique_ptr<Operator>(new Cast(std::move(args), dtype));
}

}  // namespace kiln::pipeline::detail
