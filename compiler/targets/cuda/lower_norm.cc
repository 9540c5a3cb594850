// SPDX-License-Identifier: Apache-2.0
// Lowering Softmax, LogSoftmax and LayerNormalization to the row kernels (kernels/rows.h), and
// inference BatchNormalization to the per-channel affine kernel.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/elementwise.h"
#include "compiler/targets/cuda/kernels/rows.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"

namespace kiln::compiler::cuda {

bool lower_softmax(Builder& b, const Node& node, const Value* in, const Value* out) {
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  const Shape x = shape_of(in);
  const bool log = node.kind() == OpKind::kLogSoftmax;
  int64_t axis = log ? node.attrs<ops::LogSoftmax>().axis : node.attrs<ops::Softmax>().axis;
  if (axis < 0) axis += x.rank();
  if (x.rank() == 0 || axis != x.rank() - 1) return false;
  const int64_t cols = x[x.rank() - 1];
  if (cols == 0) return false;
  const int64_t rows = x.numel() / cols;
  const int xi = b.buffer_of(in);
  const int yi = b.define(out);
  add(b, node, std::string(node.op().name()), {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_softmax(e, ptr(s, xi), ptr(s, yi), rows, cols, log, s.stream);
  });
  return true;
}
bool lower_softmax(Builder& b, const Node& node) {
  return lower_softmax(b, node, node.input(0), node.output(0));
}

bool lower_batchnorm(Builder& b, const Node& node) {
  const auto& op = node.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0 || node.num_outputs() != 1 || node.num_inputs() != 5) return false;
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (!e) return false;
  const Shape x = shape_of(node.input(0));
  if (x.rank() < 2) return false;
  const int64_t c = x[1];
  std::vector<float> t[4];  // scale, B, mean, var: constants of any float type
  for (int i = 0; i < 4; ++i) {
    std::optional<std::vector<float>> v = constant_floats(node.input(i + 1));
    if (!v || static_cast<int64_t>(v->size()) != c) return false;
    t[i] = std::move(*v);
  }
  std::vector<float> scale(static_cast<size_t>(c));
  std::vector<float> shift(static_cast<size_t>(c));
  for (size_t i = 0; i < scale.size(); ++i) {
    const float s = t[0][i] / std::sqrt(t[3][i] + op.epsilon);
    scale[i] = s;
    shift[i] = t[1][i] - t[2][i] * s;
  }
  const int si = b.constant(std::move(scale));
  const int hi = b.constant(std::move(shift));
  const bool nhwc = b.is_nhwc(node.input(0));  // keeps its input's layout
  const int xi = b.stored_buffer(node.input(0));
  const int yi = b.define(node.output(0), nhwc);
  const int64_t n = x.numel();
  const int64_t inner = nhwc ? 1 : c == 0 ? 0 : n / (x[0] * c);
  add(b, node, "BatchNormalization", {xi, si, hi}, {yi}, [=, e = *e](Session& s) {
    return launch_channel_affine(e, ptr(s, xi), ptr(s, yi), f32(s, si), f32(s, hi), nullptr, n, c,
                                 inner, -INFINITY, INFINITY, s.stream);
  });
  return true;
}

bool lower_layernorm(Builder& b, const Node& node, const Value* in, const Value* out) {
  const auto& op = node.attrs<ops::LayerNormalization>();
  if (node.num_outputs() != 1) return false;
  const std::optional<Elem> e = common_elem({in, out});
  if (!e) return false;
  const Shape x = shape_of(in);
  int64_t axis = op.axis < 0 ? op.axis + x.rank() : op.axis;
  if (axis < 0 || axis >= x.rank()) return false;
  int64_t cols = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) cols *= x[d];
  if (cols == 0) return false;
  const int64_t rows = x.numel() / cols;
  // Scale and bias: constants of any float type, applied in f32.
  std::optional<std::vector<float>> scale = constant_floats(node.input(1));
  std::optional<std::vector<float>> bias;
  if (node.has_input(2)) {
    bias = constant_floats(node.input(2));
    if (!bias || static_cast<int64_t>(bias->size()) != cols) return false;
  }
  if (!scale || static_cast<int64_t>(scale->size()) != cols) return false;
  const int si = b.constant(std::move(*scale));
  const int bi = bias ? b.constant(std::move(*bias)) : -1;
  const int xi = b.buffer_of(in);
  const int yi = b.define(out);
  const float epsilon = op.epsilon;
  std::vector<int> reads = {xi, si};
  if (bi >= 0) reads.push_back(bi);
  add(b, node, "LayerNormalization", reads, {yi}, [=, e = *e](Session& s) {
    return launch_layernorm(e, ptr(s, xi), ptr(s, yi), f32(s, si), bi >= 0 ? f32(s, bi) : nullptr,
                            rows, cols, epsilon, s.stream);
  });
  return true;
}
bool lower_layernorm(Builder& b, const Node& node) {
  return lower_layernorm(b, node, node.input(0), node.output(0));
}

}  // namespace kiln::compiler::cuda
