// SPDX-License-Identifier: Apache-2.0
// A Conv node's oneDNN convolution parameters, which every convolution lowering starts from.
#include "compiler/ops/nn.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

std::optional<ConvSetup> conv_setup(const Node& node, bool allow_bf16) {
  const auto& op = node.attrs<ops::Conv>();
  if (op.activation && *op.activation != "Relu") return std::nullopt;
  std::optional<StaticShapes> shapes =
      allow_bf16 ? static_float_shapes(node) : static_f32_shapes(node);
  if (!shapes || node.num_inputs() < 2 || !shapes->inputs[1]) return std::nullopt;
  const Shape& x = *shapes->inputs[0];
  const Shape& w = *shapes->inputs[1];
  const Shape& y = shapes->output;
  const int spatial = x.rank() - 2;
  if (spatial < 1 || spatial > 3 || w.rank() != x.rank() || y.rank() != x.rank()) {
    return std::nullopt;
  }
  const int64_t groups = op.group;
  if (groups < 1 || x[1] % groups != 0 || w[0] % groups != 0 || w[1] * groups != x[1]) {
    return std::nullopt;
  }
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (op.kernel_shape && *op.kernel_shape != kernel) return std::nullopt;
  Result<WindowGeometry> g =
      forward_window(in, kernel, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>(y.begin() + 2, y.end())) return std::nullopt;
  const bool has_bias = node.has_input(2);
  if (has_bias && (shapes->inputs[2]->rank() != 1 || (*shapes->inputs[2])[0] != w[0])) {
    return std::nullopt;
  }
  ConvSetup s;
  s.src = to_dims(x);
  s.dst = to_dims(y);
  // Grouped weights [g, O/g, I/g, k...] are the ONNX [O, I/g, k...] array, reshaped.
  s.weights = to_dims(w);
  if (groups > 1) {
    s.weights[0] = w[0] / groups;
    s.weights.insert(s.weights.begin(), groups);
  }
  s.user_weights = plain_desc(s.weights, node.input(1)->tensor_type().dtype);
  s.weights_const = node.input(1)->constant_value();
  s.has_bias = has_bias;
  if (has_bias) s.bias = to_dims(*shapes->inputs[2]);
  s.bias_const = has_bias ? node.input(2)->constant_value() : nullptr;
  s.strides = to_dims(g->strides);
  for (int64_t d : g->dilations) s.dilates.push_back(d - 1);
  s.pad_begin = to_dims(g->pad_begin);
  s.pad_end = to_dims(g->pad_end);
  s.relu = op.activation.has_value();
  return s;
}

}  // namespace kiln::compiler::cpu
