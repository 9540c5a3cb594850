// SPDX-License-Identifier: Apache-2.0
// Sliding-window geometry of Conv, ConvTranspose and the pooling ops.
#include "compiler/ops/nn_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::compiler {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}

// `values`, or `n` copies of `fallback` when absent; checks the length and a lower bound.
Result<std::vector<int64_t>> per_axis(const std::optional<std::vector<int64_t>>& values,
                                      std::string_view name, size_t n, int64_t fallback,
                                      int64_t min) {
  if (!values) return std::vector<int64_t>(n, fallback);
  if (values->size() != n) {
    return invalid_argument_error(
        fmt::format("expected {} with {} values, got {}", name, n, ints_string(*values)));
  }
  for (int64_t v : *values) {
    if (v < min) {
      return invalid_argument_error(fmt::format("expected every value of {} to be >= {}, got {}",
                                                name, min, ints_string(*values)));
    }
  }
  return *values;
}

// Checks the parts every window op shares and fills strides, dilations and explicit pads.
Result<WindowGeometry> common_window(size_t n, std::vector<int64_t> kernel,
                                     const WindowAttrs& attrs) {
  WindowGeometry g;
  if (kernel.size() != n) {
    return invalid_argument_error(
        fmt::format("expected a kernel of {} spatial dims, got {}", n, ints_string(kernel)));
  }
  for (int64_t k : kernel) {
    if (k < 1) {
      return invalid_argument_error(
          fmt::format("expected a positive kernel shape, got {}", ints_string(kernel)));
    }
  }
  g.kernel = std::move(kernel);
  KILN_ASSIGN_OR_RETURN(g.strides, per_axis(attrs.strides, "strides", n, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.dilations, per_axis(attrs.dilations, "dilations", n, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, per_axis(attrs.pads, "pads", 2 * n, 0, 0));
  const std::string& ap = attrs.auto_pad;
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER") {
    return invalid_argument_error(
        fmt::format("expected auto_pad NOTSET, VALID, SAME_UPPER or SAME_LOWER, got \"{}\"", ap));
  }
  bool any_pad = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; });
  if (ap != "NOTSET" && any_pad) {
    return invalid_argument_error(
        fmt::format("pads {} cannot be combined with auto_pad {}", ints_string(pads), ap));
  }
  g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  g.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  g.out.assign(n, -1);
  return g;
}

// Splits a total padding the ONNX way: SAME_UPPER puts the odd one at the end, others at the
// start. `total` may be negative (ConvTranspose with a larger output_shape).
void split_padding(int64_t total, bool upper, int64_t& begin, int64_t& end) {
  int64_t half = floor_div(total, 2);
  begin = upper ? half : total - half;
  end = total - begin;
}

}  // namespace

std::string ints_string(std::span<const int64_t> values) {
  return fmt::format("[{}]", fmt::join(values, ","));
}

Result<WindowGeometry> forward_window(std::span<const int64_t> in, std::vector<int64_t> kernel,
                                      const WindowAttrs& attrs) {
  const size_t n = in.size();
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, common_window(n, std::move(kernel), attrs));
  const std::string& ap = attrs.auto_pad;
  for (size_t a = 0; a < n; ++a) {
    const int64_t size = in[a];
    const int64_t s = g.strides[a];
    const int64_t span = g.span(static_cast<int>(a));
    if (size < 0) continue;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g.out[a] = (size + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (g.out[a] - 1) * s + span - size);
      split_padding(total, ap == "SAME_UPPER", g.pad_begin[a], g.pad_end[a]);
      continue;
    }
    const int64_t avail = size + g.pad_begin[a] + g.pad_end[a] - span;
    if (avail < 0) {
      return invalid_argument_error(fmt::format(
          "the window (kernel {}, dilations {}) is larger than the padded input {} on spatial "
          "axis {}",
          ints_string(g.kernel), ints_string(g.dilations), ints_string(in), a));
    }
    int64_t out = (attrs.ceil_mode ? (avail + s - 1) / s : avail / s) + 1;
    // A ceil-mode window must start inside the input or the leading padding.
    if (attrs.ceil_mode && (out - 1) * s >= size + g.pad_begin[a]) --out;
    g.out[a] = out;
  }
  return g;
}

Result<WindowGeometry> transpose_window(std::span<const int64_t> in, std::vector<int64_t> kernel,
                                        const WindowAttrs& attrs,
                                        const std::optional<std::vector<int64_t>>& output_padding,
                                        const std::optional<std::vector<int64_t>>& output_shape) {
  const size_t n = in.size();
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, common_window(n, std::move(kernel), attrs));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> extra,
                        per_axis(output_padding, "output_padding", n, 0, 0));
  std::optional<std::vector<int64_t>> shape;
  if (output_shape) {
    // Some exporters write the full output shape, batch and channels included.
    std::vector<int64_t> s = *output_shape;
    if (s.size() == n + 2) s.erase(s.begin(), s.begin() + 2);
    KILN_ASSIGN_OR_RETURN(shape, per_axis(s, "output_shape", n, 0, 1));
  }
  const std::string& ap = attrs.auto_pad;
  const bool same = ap == "SAME_UPPER" || ap == "SAME_LOWER";
  for (size_t a = 0; a < n; ++a) {
    const int64_t s = g.strides[a];
    if (extra[a] >= std::max(s, g.dilations[a])) {
      return invalid_argument_error(fmt::format(
          "expected output_padding {} to be smaller than the strides {} or dilations {}",
          ints_string(extra), ints_string(g.strides), ints_string(g.dilations)));
    }
    const int64_t size = in[a];
    if (size < 0) {
      if (shape) g.out[a] = (*shape)[a];
      continue;
    }
    const int64_t natural = s * (size - 1) + extra[a] + g.span(static_cast<int>(a));
    if (shape || same) {
      g.out[a] = shape ? (*shape)[a] : size * s;
      split_padding(natural - g.out[a], ap == "SAME_UPPER", g.pad_begin[a], g.pad_end[a]);
      continue;
    }
    g.out[a] = natural - g.pad_begin[a] - g.pad_end[a];
    if (g.out[a] < 0) {
      return invalid_argument_error(
          fmt::format("pads {} leave an empty output on spatial axis {}",
                      ints_string(attrs.pads.value_or(std::vector<int64_t>{})), a));
    }
  }
  return g;
}

bool has_dilation(const std::optional<std::vector<int64_t>>& dilations) {
  return dilations && std::any_of(dilations->begin(), dilations->end(), [](int64_t d) { return d != 1; });
}

}  // namespace kiln::compiler
