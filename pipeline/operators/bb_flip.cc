// SPDX-License-Identifier: Apache-2.0
// bb_flip: mirrors relative bounding boxes the way flip mirrors the image (DALI's bb_flip).
#include "pipeline/kernels/bbox.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class BbFlip final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_boxes("bb_flip", in));
    const bool horizontal = args.get_int("horizontal") != 0;
    const bool vertical = args.get_int("vertical") != 0;
    if ((!horizontal && !vertical) || in.numel() == 0) {
      outputs->push_back(in);
      return Status();
    }
    Tensor out = in.clone();
    kernels::flip_boxes(
        out.span<float>(),
        args.get_bool("ltrb") ? kernels::BoxLayout::kLTRB : kernels::BoxLayout::kXYWH, horizontal,
        vertical);
    outputs->push_back(std::move(out));
    return Status();
  }
};

}  // namespace

const OperatorSchema& bb_flip_schema() {
  static const OperatorSchema schema{
      "bb_flip",
      "mirrors bounding boxes in relative coordinates as flip mirrors their image",
      {"bboxes"},
      {"bboxes"},
      {
          {"ltrb", ArgType::kBool, false,
           "boxes are [left, top, right, bottom]; false: [x, y, width, height]"},
          {"horizontal", ArgType::kInt, int64_t{1}, "1: mirror left-right", true},
          {"vertical", ArgType::kInt, int64_t{0}, "1: mirror upside-down", true},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_bb_flip(OpArgs args) {
  return std::unique_ptr<Operator>(new BbFlip(std::move(args)));
}

}  // namespace kiln::pipeline::detail
