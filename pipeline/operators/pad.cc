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

class Pad final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("pad", in, false));
    if (in.dtype() != DType::kU8 && in.dtype() != DType::kF32) {
      return invalid_argument_error(fmt::format(
          "operator pad: expected uint8 or float32 images, got {}", dtype_name(in.dtype())));
    }
    const auto& size = args.get_ints("size");
    const int64_t align = args.get_int("align");
    int64_t h = in.shape()[0], w = in.shape()[1];
    if (!size.empty()) {
      h = std::max(h, size[0]);
      w = std::max(w, size[1]);
    }
    h = round_up(h, align);
    w = round_up(w, align);
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          kernels::allocate_uninitialized(in.dtype(), Shape{h, w, in.shape()[2]}));
    kernels::pad_hwc(in.view(), out.view(), args.get_float("fill_value"));
    outputs->push_back(std::move(out));
    return Status();
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
