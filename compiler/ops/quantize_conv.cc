// SPDX-License-Identifier: Apache-2.0
// Convolution geometry for the quantized convolutions.
#include "compiler/ops/quantize_conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::compiler {

Result<ConvGeometry> conv_geometry(std::span<const int64_t> input, std::span<const int64_t> kernel,
                                   std::string_view auto_pad,
                                   const std::optional<std::vector<int64_t>>& strides,
                                   const std::optional<std::vector<int64_t>>& dilations,
                                   const std::optional<std::vector<int64_t>>& pads) {
  const size_t n = input.size();
  KILN_CHECK(kernel.size() == n, "conv_geometry: kernel and input ranks differ");
  ConvGeometry g;
  g.kernel.assign(kernel.begin(), kernel.end());
  g.strides = strides.value_or(std::vector<int64_t>(n, 1));
  g.dilations = dilations.value_or(std::vector<int64_t>(n, 1));
  if (g.strides.size() != n || g.dilations.size() != n) {
    return invalid_argument_error(fmt::format(
        "expected {} strides and dilations (one per spatial dim), got strides {} and dilations {}",
        n, g.strides, g.dilations));
  }
  for (size_t d = 0; d < n; ++d) {
    if (g.strides[d] < 1 || g.dilations[d] < 1) {
      return invalid_argument_error(
          fmt::format("expected positive strides and dilations, got strides {} and dilations {}",
                      g.strides, g.dilations));
    }
    if (g.kernel[d] < 1) {
      return invalid_argument_error(fmt::format("expected a non-empty kernel, got {}", g.kernel));
    }
  }
  g.pads_begin.assign(n, 0);
  g.pads_end.assign(n, 0);
  g.output.assign(n, 0);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    if (pads) {
      if (pads->size() != 2 * n) {
        return invalid_argument_error(
            fmt::format("expected {} pads (begin and end per spatial dim), got {}", 2 * n, *pads));
      }
      for (size_t d = 0; d < n; ++d) {
        g.pads_begin[d] = (*pads)[d];
        g.pads_end[d] = (*pads)[d + n];
        if (g.pads_begin[d] < 0 || g.pads_end[d] < 0) {
          return invalid_argument_error(fmt::format("expected non-negative pads, got {}", *pads));
        }
      }
    }
  } else if (!same && auto_pad != "VALID") {
    return invalid_argument_error(fmt::format(
        "expected auto_pad NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"{}\"", auto_pad));
  }
  for (size_t d = 0; d < n; ++d) {
    const int64_t extent = (g.kernel[d] - 1) * g.dilations[d] + 1;
    if (same) {
      const int64_t out = (input[d] + g.strides[d] - 1) / g.strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[d] + extent - input[d]);
      const int64_t small = total / 2;
      g.pads_begin[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[d] = total - g.pads_begin[d];
    }
    const int64_t padded = input[d] + g.pads_begin[d] + g.pads_end[d];
    if (padded < extent) {
      return invalid_argument_error(fmt::format(
          "the padded input (spatial dim {} of size {}) is smaller than the dilated kernel ({})", d,
          padded, extent));
    }
    g.output[d] = (padded - extent) / g.strides[d] + 1;
  }
  return g;
}

}  // namespace kiln::compiler
