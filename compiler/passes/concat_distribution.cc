// SPDX-License-Identifier: Apache-2.0
// Concat distribution: a channel Concat's sole consumer (a pooling or a Conv) runs on each piece.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

// Splitting a Conv's input channels into more pieces than this, or into pieces thinner than
// kMinPieceChannels, makes each piece's product too small for the fast kernels.
constexpr int kMaxPieces = 4;
constexpr int64_t kMinPieceChannels = 16;

bool is_static_f32(const Value* v, int rank) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().rank() == rank;
}

// The Concat producing `v` when it joins static f32 rank-4 pieces along the channel axis, and
// nothing but `consumer` reads its output.
Node* channel_concat(const Value* v, const Node& consumer) {
  Node* concat = v->producer();
  if (concat == nullptr || concat->kind() != OpKind::kConcat ||
      concat->graph() != consumer.graph() || concat->num_inputs() < 2 ||
      concat->num_inputs() > kMaxPieces || !is_static_f32(v, 4) || is_graph_output(v) ||
      v->uses().size() != 1) {
    return nullptr;
  }
  int64_t axis = concat->attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += 4;
  if (axis != 1) return nullptr;
  for (const Value* x : concat->inputs()) {
    if (!is_static_f32(x, 4)) return nullptr;
  }
  return concat;
}

TensorType with_channels(const Value* like, int64_t channels) {
  Shape shape = like->tensor_type().shape();
  shape[1] = channels;
  return TensorType(DType::kF32, shape);
}

// MaxPool/AveragePool(Concat(x1, ..., xn))  ==>  Concat(Pool(x1), ..., Pool(xn)): pooling keeps
// channels apart, and the Concat moves on towards a consumer that can take its pieces.
Result<bool> pool_through_concat(Graph& graph, Node* pool) {
  if (pool->kind() != OpKind::kMaxPool && pool->kind() != OpKind::kAveragePool) return false;
  if (!pool->has_input(0) || !is_static_f32(pool->output(0), 4)) return false;
  for (int i = 1; i < pool->num_outputs(); ++i) {
    if (!pool->output(i)->uses().empty() || is_graph_output(pool->output(i))) return false;
  }
  Node* concat = channel_concat(pool->input(0), *pool);
  if (concat == nullptr) return false;
  std::vector<Value*> pieces;
  for (int i = 0; i < concat->num_inputs(); ++i) {
    Value* x = concat->input(i);
    Node* p = graph.add_node(pool->op(), {x}, 1,
                             graph.unique_name(fmt::format("{}_{}", pool->name(), i)), pool);
    p->output(0)->set_type(with_channels(pool->output(0), x->tensor_type().shape()[1]));
    pieces.push_back(p->output(0));
  }
  Node* joined = graph.add_node(concat->op(), pieces, 1, graph.unique_name(concat->name()), pool);
  joined->output(0)->set_type(pool->output(0)->type());
  if (!replace_node(graph, pool, joined->output(0))) return false;
  if (concat->output(0)->uses().empty()) graph.erase(concat);
  return true;
}

// Conv(Concat(x1, ..., xn), W, B) with group 1 and constant W  ==>
// Add(Conv(xn, Wn), ... Add(Conv(x2, W2), Conv(x1, W1, B))), Wi being Wi's input channels: each
// Add runs as the next Conv's sum post-op, so the pieces are never copied together.
Result<bool> conv_through_concat(Graph& graph, Node* conv) {
  if (conv->kind() != OpKind::kConv || !conv->has_input(0) || !conv->has_input(1)) return false;
  const ops::Conv& attrs = conv->attrs<ops::Conv>();
  if (attrs.group != 1 || attrs.activation || !is_static_f32(conv->output(0), 4)) return false;
  const Tensor* w = conv->input(1)->constant_value();
  if (w == nullptr || w->dtype() != DType::kF32 || w->rank() != 4) return false;
  Node* concat = channel_concat(conv->input(0), *conv);
  if (concat == nullptr) return false;
  int64_t channels = 0;
  for (const Value* x : concat->inputs()) {
    const int64_t c = x->tensor_type().shape()[1];
    if (c < kMinPieceChannels) return false;
    channels += c;
  }
  // Each piece after the first adds a read and a write of the output (its sum), where the Concat
  // wrote its input once: it pays when the output is no wider than the input.
  if (channels != w->shape()[1] || w->shape()[0] > channels) return false;

  const Shape& ws = w->shape();
  const int64_t taps = ws[2] * ws[3];
  Value* sum = nullptr;
  int64_t first = 0;
  for (int i = 0; i < concat->num_inputs(); ++i) {
    Value* x = concat->input(i);
    const int64_t c = x->tensor_type().shape()[1];
    Tensor part(DType::kF32, Shape{ws[0], c, ws[2], ws[3]});
    for (int64_t m = 0; m < ws[0]; ++m) {
      const float* from = w->data<float>() + (m * ws[1] + first) * taps;
      std::copy(from, from + c * taps, part.data<float>() + m * c * taps);
    }
    first += c;
    const std::string name = graph.unique_name(fmt::format("{}_{}", conv->name(), i));
    std::vector<Value*> inputs{x, graph.add_constant(std::move(part), name + "_w", conv)};
    if (i == 0 && conv->has_input(2)) inputs.push_back(conv->input(2));
    Node* piece = graph.add_node(conv->op(), std::move(inputs), 1, name, conv);
    piece->output(0)->set_type(conv->output(0)->type());
    if (sum == nullptr) {
      sum = piece->output(0);
      continue;
    }
    Node* add = graph.add_node(Op(ops::Add{}), {piece->output(0), sum}, 1,
                               graph.unique_name(name + "_add"), conv);
    add->output(0)->set_type(conv->output(0)->type());
    sum = add->output(0);
  }
  if (!replace_node(graph, conv, sum)) return false;
  if (concat->output(0)->uses().empty()) graph.erase(concat);
  return true;
}

class ConcatDistribution final : public Pass {
 public:
  std::string_view name() const override { return "concat_distribution"; }
  Result<bool> run(Graph& graph) override {
    return rewrite_to_fixpoint(graph, {pool_through_concat, conv_through_concat});
  }
};

}  // namespace

std::unique_ptr<Pass> make_concat_distribution() {
  return std::make_unique<ConcatDistribution>();
}

}  // namespace kiln::compiler
