// SPDX-License-Identifier: Apache-2.0
// Convolution geometry (output dims, resolved pads) shared by ConvInteger and QLinearConv.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::compiler {

// The spatial geometry of one convolution, every entry resolved (no defaults, no auto_pad).
struct ConvGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output;
};

// Resolves ONNX Conv-style attributes against known spatial input dims `input` and kernel dims
// `kernel` (same length). Fails with an invalid-argument error (message without the node name)
// on attributes of the wrong length, non-positive strides or dilations, negative pads, an unknown
// auto_pad, or an input smaller than the dilated kernel.
Result<ConvGeometry> conv_geometry(std::span<const int64_t> input, std::span<const int64_t> kernel,
                                   std::string_view auto_pad,
                                   const std::optional<std::vector<int64_t>>& strides,
                                   const std::optional<std::vector<int64_t>>& dilations,
                                   const std::optional<std::vector<int64_t>>& pads);

}  // namespace kiln::compiler
