// SPDX-License-Identifier: Apache-2.0
// The oneDNN pooling descriptor of a MaxPool, AveragePool or GlobalAveragePool node. ceil_mode
// becomes extra right padding, which oneDNN's max and padding-excluding average ignore.
#include <algorithm>

#include "compiler/ops/nn.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

struct PoolSpec {
  dnnl::algorithm algorithm;
  WindowGeometry geometry;
  // Whether padding counts in averages; then ceil_mode may not stretch the right padding.
  bool include_padding = false;
};

std::vector<int64_t> spatial(const Shape& s) {
  return std::vector<int64_t>(s.begin() + 2, s.end());
}

std::optional<PoolSpec> pool_spec(const Node& node, const std::vector<int64_t>& in) {
  if (const auto* op = node.op().get_if<ops::MaxPool>()) {
    // The Indices output is the ref kernel's.
    for (int i = 1; i < node.num_outputs(); ++i) {
      const Value* indices = node.output(i);
      const auto& returned = node.graph()->outputs();
      if (!indices->uses().empty() ||
          std::find(returned.begin(), returned.end(), indices) != returned.end()) {
        return std::nullopt;
      }
    }
    if (!op->kernel_shape) return std::nullopt;
    Result<WindowGeometry> g =
        forward_window(in, *op->kernel_shape,
                       {op->auto_pad, op->strides, op->dilations, op->pads, op->ceil_mode != 0});
    if (!g.ok()) return std::nullopt;
    return PoolSpec{dnnl::algorithm::pooling_max, std::move(*g)};
  }
  if (const auto* op = node.op().get_if<ops::AveragePool>()) {
    if (!op->kernel_shape || has_dilation(op->dilations)) return std::nullopt;
    Result<WindowGeometry> g =
        forward_window(in, *op->kernel_shape,
                       {op->auto_pad, op->strides, std::nullopt, op->pads, op->ceil_mode != 0});
    if (!g.ok()) return std::nullopt;
    const bool include = op->count_include_pad != 0;
    return PoolSpec{include ? dnnl::algorithm::pooling_avg_include_padding
                            : dnnl::algorithm::pooling_avg_exclude_padding,
                    std::move(*g), include};
  }
  if (node.kind() == OpKind::kGlobalAveragePool) {
    const std::string notset = "NOTSET";
    Result<WindowGeometry> g =
        forward_window(in, in, {notset, std::nullopt, std::nullopt, std::nullopt});
    if (!g.ok()) return std::nullopt;
    return PoolSpec{dnnl::algorithm::pooling_avg_exclude_padding, std::move(*g)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<dnnl::pooling_v2_forward::desc> pool_desc(const Node& node, const memory::desc& src,
                                                        const memory::desc& dst) {
  // The shapes whatever the element type: the Program pools f32, bf16 and (max) 8-bit data.
  auto static_shape = [](const Value* v) -> std::optional<Shape> {
    if (v == nullptr || !v->type().is_tensor() || !v->tensor_type().is_static()) {
      return std::nullopt;
    }
    return v->tensor_type().shape();
  };
  if (node.num_inputs() < 1 || node.num_outputs() < 1) return std::nullopt;
  const std::optional<Shape> in = static_shape(node.input(0));
  const std::optional<Shape> out = static_shape(node.output(0));
  if (!in || !out || in->rank() < 3 || in->rank() > 5 || out->rank() != in->rank()) {
    return std::nullopt;
  }
  const Shape& x = *in;
  const Shape& y = *out;
  std::optional<PoolSpec> spec = pool_spec(node, spatial(x));
  if (!spec) return std::nullopt;
  const WindowGeometry& g = spec->geometry;
  if (g.out != spatial(y)) return std::nullopt;
  // oneDNN sizes the output as floor((in + pads - span) / stride) + 1: ceil_mode needs the right
  // padding that gives the output ONNX asks for.
  std::vector<int64_t> pad_end = g.pad_end;
  for (int a = 0; a < g.rank(); ++a) {
    const auto i = static_cast<size_t>(a);
    const int64_t need = (g.out[i] - 1) * g.strides[i] + g.span(a) - x[a + 2] - g.pad_begin[i];
    if (need > pad_end[i]) {
      if (spec->include_padding) return std::nullopt;
      pad_end[i] = need;
    }
  }
  std::vector<int64_t> dilates;
  for (int64_t d : g.dilations) dilates.push_back(d - 1);
  return dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, spec->algorithm, src,
                                        dst, to_dims(g.strides), to_dims(g.kernel),
                                        to_dims(dilates), to_dims(g.pad_begin), to_dims(pad_end));
}

}  // namespace kiln::compiler::cpu
