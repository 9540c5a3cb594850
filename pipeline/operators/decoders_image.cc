// SPDX-License-Identifier: Apache-2.0
// decoders.image: encoded JPEG/PNG bytes to an HWC uint8 image.
#include <fmt/format.h>

#include "pipeline/decoders/image_decoder.h"
#include "pipeline/operators/decode_args.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class DecodersImage final : public Operator {
 public:
  DecodersImage(OpArgs args, DecodeOptions options)
      : Operator(std::move(args)), options_(options) {}

  Status run(const SampleContext& ctx, const OpArgs&, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& encoded = inputs[0];
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(encoded.raw_data()),
                                   encoded.nbytes());
    KILN_ASSIGN_OR_RETURN(Tensor image, decode_image(bytes, ctx.path, options_));
    outputs->push_back(std::move(image));
    return Status();
  }

 private:
  DecodeOptions options_;
};

}  // namespace

const OperatorSchema& decoders_image_schema() {
  static const OperatorSchema schema{"decoders.image",
                                     "decodes JPEG or PNG bytes into an HWC uint8 image",
                                     {"encoded"},
                                     {"images"},
                                     decode_arg_specs("image")};
  return schema;
}

std::vector<ArgSpec> decode_arg_specs(std::string_view resized) {
  return {
      {"output_type", ArgType::kString, std::string("RGB"), "RGB, BGR or GRAY"},
      {"min_width", ArgType::kInt, int64_t{0},
       fmt::format("width the {} will be resized to; allows DCT-domain downscaling (0: none)",
                   resized)},
      {"min_height", ArgType::kInt, int64_t{0},
       fmt::format("height the {} will be resized to; allows DCT-domain downscaling (0: none)",
                   resized)},
  };
}

Result<DecodeOptions> decode_options(const OpArgs& args) {
  DecodeOptions options;
  KILN_ASSIGN_OR_RETURN(options.color, parse_color_format(args.get_string("output_type")));
  options.min_width = std::max<int64_t>(args.get_int("min_width"), 0);
  options.min_height = std::max<int64_t>(args.get_int("min_height"), 0);
  return options;
}

Result<std::unique_ptr<Operator>> make_decoders_image(OpArgs args) {
  KILN_ASSIGN_OR_RETURN(DecodeOptions options, decode_options(args));
  return std::unique_ptr<Operator>(new DecodersImage(std::move(args), options));
}

}  // namespace kiln::pipeline::detail
