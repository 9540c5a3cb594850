// SPDX-License-Identifier: Apache-2.0
// The arguments every image decoder operator takes (output_type, min_width, min_height), declared
// and read in one place.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/schema/schema.h"

namespace kiln::pipeline::detail {

// The schema entries; `resized` names what min_width/min_height resize ("image", "window").
std::vector<ArgSpec> decode_arg_specs(std::string_view resized);

// The options those arguments give; an unknown output_type is an error naming it.
Result<DecodeOptions> decode_options(const OpArgs& args);

}  // namespace kiln::pipeline::detail
