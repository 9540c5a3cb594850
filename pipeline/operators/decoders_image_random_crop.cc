// SPDX-License-Identifier: Apache-2.0
// decoders.image_random_crop: decodes only a RandomResizedCrop window of each image (on the GPU:
// the hardware decoder decodes the whole JPEG and the window is cut out there).
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

  // On the GPU: the window is drawn as run() draws it; the hardware decoder's share (the next
  // draw) decodes whole and is cut to the window there, the rest decodes here as run() does and
  // is uploaded (DCT-scaled when min_width/min_height allow, as on the CPU).
  bool supports_gpu() const override { return true; }
  bool gpu_reads_host() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape&, DType,
                                 const Tensor* host) const override {
    KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes,
                          encoded_bytes("decoders.image_random_crop", host));
    KILN_ASSIGN_OR_RETURN(ImageInfo info, read_image_info(bytes, ctx.path));
    SampleRng rng(ctx.seed);
    const kernels::Window window =
        random_resized_crop_window(info.height, info.width, params_, rng);
    const double draw = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    GpuSamplePlan plan;
    if (std::optional<JpegHeader> header = hardware_jpeg(bytes, draw, args)) {
      plan.step.out_height = header->height;
      plan.step.out_width = header->width;
      plan.step.window = window;
      plan.out_shape = Shape{window.height, window.width, color_channels(options_.color)};
      return plan;
    }
    KILN_ASSIGN_OR_RETURN(Tensor image, decode_image_window(bytes, ctx.path, options_, window));
    return cpu_decoded_plan(std::move(image));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages&,
                                     std::span<const Tensor> host,
                                     std::span<const kernels::GpuStep> steps) const override {
    KILN_ASSIGN_OR_RETURN(kernels::GpuImages decoded,
                          stream.decode_jpeg(host, steps, jpeg_output(options_.color)));
    // The hardware-decoded images cut to their windows; the uploaded ones kept whole.
    std::vector<kernels::GpuStep> crops(steps.size());
    bool any = false;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Shape& s = decoded.shapes[i];
      const bool whole = steps[i].host.defined();
      crops[i].window = whole ? kernels::Window{0, 0, s[0], s[1]} : steps[i].window;
      crops[i].out_height = crops[i].window.height;
      crops[i].out_width = crops[i].window.width;
      any = any || !whole;
    }
    if (!any) return decoded;
    return stream.crop_flip(decoded, crops);
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
    args.push_back(gpu_decode_arg_specs("window").back());
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
  KILN_RETURN_IF_ERROR(check_hw_decoder_load("decoders.image_random_crop", args));
  RandomCropParams params{area[0], std::min(area[1], 1.0), aspect[0], aspect[1],
                          std::max<int64_t>(args.get_int("num_attempts"), 1)};
  return std::unique_ptr<Operator>(new DecodersImageRandomCrop(std::move(args), options, params));
}

}  // namespace kiln::pipeline::detail
