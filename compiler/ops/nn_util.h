// SPDX-License-Identifier: Apache-2.0
// Sliding-window geometry of Conv, ConvTranspose and pooling, shared by inference and kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::compiler {

// Per spatial axis: the window and where it sits on the input. Output sizes are -1 where the
// input size is unknown (and then the pads of SAME_* padding are 0 placeholders).
struct WindowGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  // Zero or positive for Conv and pooling; ConvTranspose may have negative pads (an output_shape
  // larger than the natural one grows the output).
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
  std::vector<int64_t> out;

  int rank() const { return static_cast<int>(kernel.size()); }
  // The extent of the dilated kernel along `axis`.
  int64_t span(int axis) const {
    auto a = static_cast<size_t>(axis);
    return (kernel[a] - 1) * dilations[a] + 1;
  }
};

// The attributes that place a window, as the ONNX ops spell them.
struct WindowAttrs {
  const std::string& auto_pad;
  const std::optional<std::vector<int64_t>>& strides;
  const std::optional<std::vector<int64_t>>& dilations;
  const std::optional<std::vector<int64_t>>& pads;
  bool ceil_mode = false;
};

// Conv and the pooling ops: `in` are the input's spatial sizes (-1 unknown), `kernel` the window.
// Fails (invalid argument, message without the node) on inconsistent attributes: wrong lengths,
// non-positive strides, dilations or kernel, negative pads, an unknown auto_pad, or an output
// that would be empty.
Result<WindowGeometry> forward_window(std::span<const int64_t> in, std::vector<int64_t> kernel,
                                      const WindowAttrs& attrs);

// ConvTranspose: the ONNX rules for output_shape, output_padding and auto_pad.
Result<WindowGeometry> transpose_window(std::span<const int64_t> in, std::vector<int64_t> kernel,
                                        const WindowAttrs& attrs,
                                        const std::optional<std::vector<int64_t>>& output_padding,
                                        const std::optional<std::vector<int64_t>>& output_shape);

// Whether `dilations` spaces the window's taps apart (absent means 1 on every axis).
bool has_dilation(const std::optional<std::vector<int64_t>>& dilations);

// "[1,2,3]" for error messages.
std::string ints_string(std::span<const int64_t> values);

}  // namespace kiln::compiler
