// SPDX-License-Identifier: Apache-2.0
// decoders.image_random_crop: decodes only a RandomResizedCrop window of each image.
#include <fmt/format.h>

#include "pipeline/decoders/image_decoder.h"
#include "pipeline/operators/crop_window.h"
#include "pipeline/operators/decode_args.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class DecodersImageRandomCrop final : public Operator {
 public:
  DecodersImageRandomCrop(OpArgs args, DecodeOptions options, RandomCropParams params)
      : Operator(std::move(args)), options_(options), params_(params) {}

  Status run(const SampleContext& ctx, const OpArgs&, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& encoded = inputs[0];
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(encoded.raw_data()),
                                   encoded.nbytes());
    KILN_ASSIGN_OR_RETURN(ImageInfo info, read_image_info(bytes, ctx.path));
    SampleRng rng(ctx.seed);
    kernels::Window window = random_resized_crop_window(info.height, info.width, params_, rng);
    KILN_ASSIGN_OR_RETURN(Tensor image, decode_image_window(bytes, ctx.path, options_, window));
    outputs->push_back(std::move(image));
    return Status();
  }

 private:
  DecodeOptions options_;
  RandomCropParams params_;
};

Status check_range(std::string_view arg, const std::vector<double>& v, double lo_bound) {
  if (v.size() != 2 || !(v[0] > lo_bound) || !(v[0] <= v[1])) {
    return invalid_argument_error(
        fmt::format("operator decoders.image_random_crop: {} must be [lo, hi] with {} < lo <= hi, "
                    "got [{}]",
                    arg, lo_bound, fmt::join(v, ",")));
  }
  return Status();
}

}  // namespace

const OperatorSchema& decoders_image_random_crop_schema() {
  static const OperatorSchema schema = [] {
    std::vector<ArgSpec> args = decode_arg_specs("window");
    args.insert(
        args.begin() + 1,
        {{"random_area", ArgType::kFloatList, std::vector<double>{0.08, 1.0},
          "range of the window's area as a fraction of the image"},
         {"random_aspect_ratio", ArgType::kFloatList, std::vector<double>{3.0 / 4.0, 4.0 / 3.0},
          "range of the window's width / height"},
         {"num_attempts", ArgType::kInt, int64_t{10},
          "draws before falling back to a centre crop"}});
    return OperatorSchema{
        "decoders.image_random_crop",
        "decodes a random area/aspect window of each image (RandomResizedCrop), skipping the rest",
        {"encoded"},
        {"images"},
        std::move(args)};
  }();
  return schema;
}

Result<std::unique_ptr<Operator>> make_decoders_image_random_crop(OpArgs args) {
  KILN_ASSIGN_OR_RETURN(DecodeOptions options, decode_options(args));
  const auto& area = args.get_floats("random_area");
  const auto& aspect = args.get_floats("random_aspect_ratio");
  KILN_RETURN_IF_ERROR(check_range("random_area", area, 0.0));
  KILN_RETURN_IF_ERROR(check_range("random_aspect_ratio", aspect, 0.0));
  RandomCropParams params{area[0], std::min(area[1], 1.0), aspect[0], aspect[1],
                          std::max<int64_t>(args.get_int("num_attempts"), 1)};
  return std::unique_ptr<Operator>(new DecodersImageRandomCrop(std::move(args), options, params));
}

}  // namespace kiln::pipeline::detail
