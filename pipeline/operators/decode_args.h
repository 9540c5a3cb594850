// SPDX-License-Identifier: Apache-2.0
// The arguments every image decoder operator takes (output_type, min_width, min_height), declared
// and read in one place.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/decoders/jpeg_header.h"
#include "pipeline/kernels/gpu_images.h"
#include "pipeline/operators/operator.h"
#include "pipeline/schema/schema.h"

namespace kiln::pipeline::detail {

// The schema entries; `resized` names what min_width/min_height resize ("image", "window").
std::vector<ArgSpec> decode_arg_specs(std::string_view resized);

// The options those arguments give; an unknown output_type is an error naming it.
Result<DecodeOptions> decode_options(const OpArgs& args);

// decode_arg_specs plus hw_decoder_load, for the decoders with a GPU form; make_* checks it with
// check_hw_decoder_load.
std::vector<ArgSpec> gpu_decode_arg_specs(std::string_view resized);
Status check_hw_decoder_load(std::string_view op, const OpArgs& args);

// The header of a JPEG the GPU's hardware decoder takes for this sample, or nullopt when the CPU
// decodes it: a share hw_decoder_load of the samples (`draw`, uniform in [0, 1) from the sample's
// seed, below it; DALI's split), baseline and whole (its end-of-image marker present, so a JPEG
// cut short gets the CPU decoder's error), on a machine with hardware decoders.
std::optional<JpegHeader> hardware_jpeg(std::span<const uint8_t> bytes, double draw,
                                        const OpArgs& args);
// The GPU decoder's pixel layout for `color`.
kernels::JpegOutput jpeg_output(ColorFormat color);

// The encoded bytes a GPU decoder's plan reads (`host`, what the reader made), or an error naming
// `op` when its input was made on the GPU.
Result<std::span<const uint8_t>> encoded_bytes(std::string_view op, const Tensor* host);
// The GPU plan of a sample decoded here on the CPU (`image`): uploaded as it is.
GpuSamplePlan cpu_decoded_plan(Tensor image);

}  // namespace kiln::pipeline::detail
