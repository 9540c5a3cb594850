// SPDX-License-Identifier: Apache-2.0
// Pool before pointwise Conv: AveragePool(Conv1x1(x)) becomes Conv1x1(AveragePool(x)).
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

bool is_static_f32(const Value* v, int rank) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().rank() == rank;
}

bool all_equal(const std::optional<std::vector<int64_t>>& values, int64_t want) {
  if (!values) return true;
  for (int64_t v : *values) {
    if (v != want) return false;
  }
  return true;
}

// A 1x1 Conv with unit strides, no padding and no fused activation: each output pixel is a
// linear map of the same input pixel, the same map at every pixel.
bool is_pointwise(const Node& conv) {
  if (conv.kind() != OpKind::kConv || !conv.has_input(0) || !conv.has_input(1)) return false;
  const auto& op = conv.attrs<ops::Conv>();
  if (op.activation || (op.auto_pad != "NOTSET" && op.auto_pad != "VALID") ||
      !all_equal(op.strides, 1) || !all_equal(op.pads, 0)) {
    return false;
  }
  const Value* w = conv.input(1);
  return is_static_f32(w, 4) && w->tensor_type().shape()[2] == 1 &&
         w->tensor_type().shape()[3] == 1;
}

// AveragePool(Conv(x, W, B)) with a pointwise Conv read only by the pool, and a pool without
// padding (its window weights add up to 1, so the bias passes through)  ==>
// Conv(AveragePool(x), W, B): the Conv runs on the pooled pixels (a quarter of them for DenseNet's
// 2x2 transitions), the pool on the Conv's input channels.
Result<bool> pool_before_conv(Graph& graph, Node* pool) {
  if (pool->kind() != OpKind::kAveragePool || !pool->has_input(0) ||
      !is_static_f32(pool->output(0), 4)) {
    return false;
  }
  const auto& op = pool->attrs<ops::AveragePool>();
  if ((op.auto_pad != "NOTSET" && op.auto_pad != "VALID") || op.ceil_mode != 0 ||
      !all_equal(op.pads, 0)) {
    return false;
  }
  const Value* y = pool->input(0);
  Node* conv = y->producer();
  if (conv == nullptr || conv->graph() != pool->graph() || !is_pointwise(*conv) ||
      y->uses().size() != 1 || is_graph_output(y) || !is_static_f32(conv->input(0), 4)) {
    return false;
  }
  const Shape& in = conv->input(0)->tensor_type().shape();
  const Shape& out = pool->output(0)->tensor_type().shape();
  if (out[2] * out[3] >= in[2] * in[3]) return false;  // nothing to save

  Shape pooled_shape = out;
  pooled_shape[1] = in[1];
  Node* pooled =
      graph.add_node(pool->op(), {conv->input(0)}, 1, graph.unique_name(pool->name()), pool);
  pooled->output(0)->set_type(TensorType(DType::kF32, pooled_shape));
  std::vector<Value*> inputs{pooled->output(0)};
  for (int i = 1; i < conv->num_inputs(); ++i) inputs.push_back(conv->input(i));
  Node* moved =
      graph.add_node(conv->op(), std::move(inputs), 1, graph.unique_name(conv->name()), pool);
  moved->output(0)->set_type(pool->output(0)->type());
  if (!replace_node(graph, pool, moved->output(0))) return false;
  if (conv->output(0)->uses().empty()) graph.erase(conv);
  return true;
}

class PoolBeforePointwiseConv final : public Pass {
 public:
  std::string_view name() const override { return "pool_before_pointwise_conv"; }
  Result<bool> run(Graph& graph) override { return rewrite_to_fixpoint(graph, {pool_before_conv}); }
};

}  // namespace

std::unique_ptr<Pass> make_pool_before_pointwise_conv() {
  return std::make_unique<PoolBeforePointwiseConv>();
}

}  // namespace kiln::compiler
