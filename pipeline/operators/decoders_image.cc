// SPDX-License-Identifier: Apache-2.0
// decoders.image: encoded JPEG/PNG bytes to an HWC uint8 image.
#include <fmt/format.h>

#include "pipeline/decoders/image_decoder.h"
#include "pipeline/decoders/jpeg_header.h"
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

  // On the GPU, the hardware decoder takes whole baseline JPEGs; every other image (PNG,
  // progressive, 4:1:1, truncated, or one to be DCT-downscaled) is decoded here on the worker, as
  // run() would, and uploaded.
  bool supports_gpu() const override { return true; }
  bool gpu_reads_host() const override { return true; }
  Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args, const Shape&, DType,
                                 const Tensor* host) const override {
    KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, encoded_bytes("decoders.image", host));
    const int64_t channels = color_channels(options_.color);
    const double draw = static_cast<double>(SampleRng(ctx.seed).next() >> 11) * 0x1.0p-53;
    std::optional<JpegHeader> header = hardware_jpeg(bytes, draw, args);
    if (header && options_.min_width == 0 && options_.min_height == 0) {
      GpuSamplePlan plan;
      plan.step.out_height = header->height;
      plan.step.out_width = header->width;
      plan.out_shape = Shape{header->height, header->width, channels};
      return plan;
    }
    KILN_ASSIGN_OR_RETURN(Tensor image, decode_image(bytes, ctx.path, options_));
    return cpu_decoded_plan(std::move(image));
  }
  Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream, const kernels::GpuImages&,
                                     std::span<const Tensor> host,
                                     std::span<const kernels::GpuStep> steps) const override {
    return stream.decode_jpeg(host, steps, jpeg_output(options_.color));
  }

 private:
  DecodeOptions options_;
};

// A JPEG cut short lacks its end-of-image marker (only padding may follow it).
bool ends_with_eoi(std::span<const uint8_t> bytes) {
  size_t end = bytes.size();
  while (end > 2 && bytes[end - 1] == 0x00) --end;
  return end >= 4 && bytes[end - 2] == 0xFF && bytes[end - 1] == 0xD9;
}

}  // namespace

std::vector<ArgSpec> gpu_decode_arg_specs(std::string_view resized) {
  std::vector<ArgSpec> args = decode_arg_specs(resized);
  args.push_back({"hw_decoder_load", ArgType::kFloat, 0.9,
                  "device gpu: the share of JPEGs the hardware decoder takes; the CPU workers "
                  "decode the rest (0 to 1)"});
  return args;
}

Status check_hw_decoder_load(std::string_view op, const OpArgs& args) {
  const double load = args.get_float("hw_decoder_load");
  if (!(load >= 0.0 && load <= 1.0)) {
    return invalid_argument_error(
        fmt::format("operator {}: hw_decoder_load must lie in [0, 1], got {}", op, load));
  }
  return Status();
}

Result<std::span<const uint8_t>> encoded_bytes(std::string_view op, const Tensor* host) {
  if (host == nullptr) {
    return invalid_argument_error(
        fmt::format("operator {}: on the GPU it reads the encoded bytes a reader makes", op));
  }
  return std::span<const uint8_t>(static_cast<const uint8_t*>(host->raw_data()), host->nbytes());
}

GpuSamplePlan cpu_decoded_plan(Tensor image) {
  GpuSamplePlan plan;
  plan.step.out_height = image.shape()[0];
  plan.step.out_width = image.shape()[1];
  plan.out_shape = image.shape();
  plan.step.host = std::move(image);
  return plan;
}

kernels::JpegOutput jpeg_output(ColorFormat color) {
  return color == ColorFormat::kGray  ? kernels::JpegOutput::kGray
         : color == ColorFormat::kBGR ? kernels::JpegOutput::kBGR
                                      : kernels::JpegOutput::kRGB;
}

std::optional<JpegHeader> hardware_jpeg(std::span<const uint8_t> bytes, double draw,
                                        const OpArgs& args) {
  if (!(draw < args.get_float("hw_decoder_load"))) return std::nullopt;
  std::optional<JpegHeader> header = read_jpeg_header(bytes);
  if (!header || !header->hardware_decodable() || !ends_with_eoi(bytes) ||
      !kernels::gpu_jpeg_decoder_available()) {
    return std::nullopt;
  }
  return header;
}

const OperatorSchema& decoders_image_schema() {
  static const OperatorSchema schema{"decoders.image",
                                     "decodes JPEG or PNG bytes into an HWC uint8 image",
                                     {"encoded"},
                                     {"images"},
                                     gpu_decode_arg_specs("image")};
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
  KILN_RETURN_IF_ERROR(check_hw_decoder_load("decoders.image", args));
  return std::unique_ptr<Operator>(new DecodersImage(std::move(args), options));
}

}  // namespace kiln::pipeline::detail
