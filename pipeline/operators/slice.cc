// SPDX-License-Identifier: Apache-2.0
// slice and decoders.image_slice: cut (or decode only) the window a relative anchor and shape give,
// e.g. from random_bbox_crop (DALI's normalized slice arguments).
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/kernels/buffer.h"
#include "pipeline/operators/crop_window.h"
#include "pipeline/operators/decode_args.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class Slice final : public Operator {
 public:
  using Operator::Operator;

  Status run(const SampleContext&, const OpArgs&, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& in = inputs[0];
    KILN_RETURN_IF_ERROR(check_image("slice", in, false));
    KILN_ASSIGN_OR_RETURN(kernels::RelWindow rel, relative_window("slice", inputs[1], inputs[2]));
    const kernels::Window window = pixel_window(rel, in.shape()[0], in.shape()[1]);
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          kernels::allocate_uninitialized(
                              in.dtype(), Shape{window.height, window.width, in.shape()[2]}));
    kernels::crop_hwc(in.view(), out.view(), window);
    outputs->push_back(std::move(out));
    return Status();
  }
};

class DecodersImageSlice final : public Operator {
 public:
  DecodersImageSlice(OpArgs args, DecodeOptions options)
      : Operator(std::move(args)), options_(options) {}

  Status run(const SampleContext& ctx, const OpArgs&, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& encoded = inputs[0];
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(encoded.raw_data()),
                                   encoded.nbytes());
    KILN_ASSIGN_OR_RETURN(ImageInfo info, read_image_info(bytes, ctx.path));
    KILN_ASSIGN_OR_RETURN(kernels::RelWindow rel,
                          relative_window("decoders.image_slice", inputs[1], inputs[2]));
    KILN_ASSIGN_OR_RETURN(
        Tensor image,
        decode_image_window(bytes, ctx.path, options_, pixel_window(rel, info.height, info.width)));
    outputs->push_back(std::move(image));
    return Status();
  }

 private:
  DecodeOptions options_;
};

}  // namespace

const OperatorSchema& slice_schema() {
  static const OperatorSchema schema{
      "slice",
      "cuts the window given by a relative anchor [x, y] and shape [width, height] out of each "
      "HWC image",
      {"images", "anchor", "shape"},
      {"images"},
      {}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_slice(OpArgs args) {
  return std::unique_ptr<Operator>(new Slice(std::move(args)));
}

const OperatorSchema& decoders_image_slice_schema() {
  static const OperatorSchema schema{
      "decoders.image_slice",
      "decodes only the window given by a relative anchor [x, y] and shape [width, height]",
      {"encoded", "anchor", "shape"},
      {"images"},
      decode_arg_specs("window")};
  return schema;
}

Result<std::unique_ptr<Operator>> make_decoders_image_slice(OpArgs args) {
  KILN_ASSIGN_OR_RETURN(DecodeOptions options, decode_options(args));
  return std::unique_ptr<Operator>(new DecodersImageSlice(std::move(args), options));
}

}  // namespace kiln::pipeline::detail
