// SPDX-License-Identifier: Apache-2.0
// Convolution geometry for the quantized convolutions: the nn family's window rules.
#include "compiler/ops/quantize_conv.h"

#include <string>

#include "compiler/ops/nn_util.h"

namespace kiln::compiler {

Result<ConvGeometry> conv_geometry(std::span<const int64_t> input, std::span<const int64_t> kernel,
                                   std::string_view auto_pad,
                                   const std::optional<std::vector<int64_t>>& strides,
                                   const std::optional<std::vector<int64_t>>& dilations,
                                   const std::optional<std::vector<int64_t>>& pads) {
  KILN_CHECK(kernel.size() == input.size(), "conv_geometry: kernel and input ranks differ");
  const std::string pad_mode(auto_pad.empty() ? "NOTSET" : auto_pad);
  KILN_ASSIGN_OR_RETURN(WindowGeometry w,
                        forward_window(input, std::vector<int64_t>(kernel.begin(), kernel.end()),
                                       WindowAttrs{pad_mode, strides, dilations, pads}));
  return ConvGeometry{std::move(w.kernel),    std::move(w.strides), std::move(w.dilations),
                      std::move(w.pad_begin), std::move(w.pad_end), std::move(w.out)};
}

}  // namespace kiln::compiler
