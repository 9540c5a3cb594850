// SPDX-License-Identifier: Apache-2.0
// Lowering 2-D max and average pooling and global pooling to the pooling kernels
// (kernels/pool.h), in their input's layout.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/kernels/pool.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"

namespace kiln::compiler::cuda {

bool lower_pool(Builder& b, const Node& node) {
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (node.num_outputs() != 1 || !e) return false;
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  if (x.rank() != 4) return false;
  Pool2d p;
  p.max = node.kind() == OpKind::kMaxPool;
  std::optional<std::vector<int64_t>> no_dilations;
  Result<WindowGeometry> g = invalid_argument_error("");
  const std::vector<int64_t> in = {x[2], x[3]};
  if (p.max) {
    const auto& op = node.attrs<ops::MaxPool>();
    if (!op.kernel_shape) return false;
    g = forward_window(in, *op.kernel_shape,
                       {op.auto_pad, op.strides, op.dilations, op.pads, op.ceil_mode != 0});
  } else {
    const auto& op = node.attrs<ops::AveragePool>();
    if (!op.kernel_shape || has_dilation(op.dilations)) return false;
    p.count_include_pad = op.count_include_pad != 0;
    if (p.count_include_pad && op.ceil_mode != 0) return false;
    g = forward_window(in, *op.kernel_shape,
                       {op.auto_pad, op.strides, no_dilations, op.pads, op.ceil_mode != 0});
  }
  if (!g.ok() || g->rank() != 2 || g->out != std::vector<int64_t>{y[2], y[3]}) return false;
  set_window(p, x, y, *g);
  p.nhwc = b.is_nhwc(node.input(0));  // pools keep their input's layout
  const int xi = b.stored_buffer(node.input(0));
  const int yi = b.define(node.output(0), p.nhwc);
  add(b, node, std::string(node.op().name()), {xi}, {yi},
      [=, e = *e](Session& s) { return launch_pool2d(e, p, ptr(s, xi), ptr(s, yi), s.stream); });
  return true;
}

bool lower_global_pool(Builder& b, const Node& node) {
  const std::optional<Elem> e = common_elem({node.input(0), node.output(0)});
  if (!e) return false;
  const Shape x = shape_of(node.input(0));
  if (x.rank() < 3) return false;
  const int64_t outer = x[0] * x[1];
  const int64_t inner = x.numel() / std::max<int64_t>(outer, 1);
  if (inner == 0) return false;
  const bool max = node.kind() == OpKind::kGlobalMaxPool;
  // An NHWC input is reduced in place of reordering it; the [N, C, 1, 1] result is the same
  // either way.
  const bool nhwc = b.is_nhwc(node.input(0));
  const int xi = nhwc ? b.stored_buffer(node.input(0)) : b.buffer_of(node.input(0));
  const int yi = b.define(node.output(0));
  const int64_t batch = x[0];
  const int64_t channels = x[1];
  add(b, node, std::string(node.op().name()), {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_global_pool(e, ptr(s, xi), ptr(s, yi), batch, channels, inner, nhwc, max,
                              s.stream);
  });
  return true;
}

}  // namespace kiln::compiler::cuda
