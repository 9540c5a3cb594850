// SPDX-License-Identifier: Apache-2.0
// BatchNorm folding: an inference BatchNormalization after a Conv or Gemm with constant weights
// becomes new weights and bias on that node.
#include <cmath>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

const Tensor* f32_constant(const Node& node, int i) {
  const Tensor* t = node.has_input(i) ? node.input(i)->constant_value() : nullptr;
  return t != nullptr && t->dtype() == DType::kF32 ? t : nullptr;
}

// The BatchNormalization's per-channel scale (gamma/sqrt(var+eps)) and shift (beta-mean*scale),
// when its parameters are constant f32 vectors of `channels` elements.
bool batchnorm_affine(const Node& bn, int64_t channels, std::vector<float>* scale,
                      std::vector<float>* shift) {
  const auto& op = bn.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0 || bn.num_outputs() > 1) return false;
  const Tensor* gamma = f32_constant(bn, 1);
  const Tensor* beta = f32_constant(bn, 2);
  const Tensor* mean = f32_constant(bn, 3);
  const Tensor* var = f32_constant(bn, 4);
  for (const Tensor* t : {gamma, beta, mean, var}) {
    if (t == nullptr || t->numel() != channels) return false;
  }
  scale->resize(static_cast<size_t>(channels));
  shift->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    double s = gamma->data<float>()[c] /
               std::sqrt(static_cast<double>(var->data<float>()[c]) + op.epsilon);
    (*scale)[static_cast<size_t>(c)] = static_cast<float>(s);
    (*shift)[static_cast<size_t>(c)] =
        static_cast<float>(beta->data<float>()[c] - mean->data<float>()[c] * s);
  }
  return true;
}

// Conv(x, W, B) -> BN  ==>  Conv(x, W*scale, B*scale+shift).
bool fold_into_conv(Graph& graph, Node* conv, Node* bn) {
  if (conv->attrs<ops::Conv>().activation) return false;  // BN applies after the fused activation
  const Tensor* w = f32_constant(*conv, 1);
  if (w == nullptr || w->rank() < 3) return false;
  const int64_t channels = w->shape()[0];
  std::vector<float> scale, shift;
  if (!batchnorm_affine(*bn, channels, &scale, &shift)) return false;
  const Tensor* b = conv->has_input(2) ? f32_constant(*conv, 2) : nullptr;
  if (conv->has_input(2) && (b == nullptr || b->numel() != channels)) return false;

  Tensor new_w = w->clone();
  const int64_t per_channel = w->numel() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < per_channel; ++i)
      new_w.data<float>()[c * per_channel + i] *= scale[static_cast<size_t>(c)];
  }
  Tensor new_b(DType::kF32, Shape{channels});
  for (int64_t c = 0; c < channels; ++c) {
    float bias = b ? b->data<float>()[c] : 0.0f;
    new_b.data<float>()[c] = bias * scale[static_cast<size_t>(c)] + shift[static_cast<size_t>(c)];
  }
  conv->set_input(
      1, graph.add_constant(std::move(new_w), graph.unique_name(conv->name() + "_w_folded"), conv));
  Value* bias =
      graph.add_constant(std::move(new_b), graph.unique_name(conv->name() + "_b_folded"), conv);
  if (conv->num_inputs() > 2) {
    conv->set_input(2, bias);
  } else {
    conv->add_input(bias);
  }
  return true;
}

// Gemm(A, B, C) -> BN over its output columns  ==>  Gemm with scaled B and a new C (beta 1).
bool fold_into_gemm(Graph& graph, Node* gemm, Node* bn) {
  const auto& op = gemm->attrs<ops::Gemm>();
  const Tensor* b = f32_constant(*gemm, 1);
  if (b == nullptr || b->rank() != 2) return false;
  const int64_t n = op.transB ? b->shape()[0] : b->shape()[1];
  std::vector<float> scale, shift;
  if (!batchnorm_affine(*bn, n, &scale, &shift)) return false;
  const Tensor* c = gemm->has_input(2) ? f32_constant(*gemm, 2) : nullptr;
  if (gemm->has_input(2) && (c == nullptr || (c->numel() != n && c->numel() != 1) || c->rank() > 1))
    return false;

  Tensor new_b = b->clone();
  const int64_t rows = b->shape()[0], cols = b->shape()[1];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k)
      new_b.data<float>()[r * cols + k] *= scale[static_cast<size_t>(op.transB ? r : k)];
  }
  Tensor new_c(DType::kF32, Shape{n});
  for (int64_t j = 0; j < n; ++j) {
    float cj = c ? c->data<float>()[c->numel() == 1 ? 0 : j] * op.beta : 0.0f;
    new_c.data<float>()[j] = cj * scale[static_cast<size_t>(j)] + shift[static_cast<size_t>(j)];
  }
  ops::Gemm folded = op;
  folded.beta = 1.0f;
  gemm->set_op(Op(folded));
  gemm->set_input(
      1, graph.add_constant(std::move(new_b), graph.unique_name(gemm->name() + "_b_folded"), gemm));
  Value* bias =
      graph.add_constant(std::move(new_c), graph.unique_name(gemm->name() + "_c_folded"), gemm);
  if (gemm->num_inputs() > 2) {
    gemm->set_input(2, bias);
  } else {
    gemm->add_input(bias);
  }
  return true;
}

Result<bool> fold_batchnorm(Graph& graph, Node* bn) {
  if (bn->kind() != OpKind::kBatchNormalization || !bn->has_input(0)) return false;
  Value* x = bn->input(0);
  Node* producer = x->producer();
  if (producer == nullptr || x->uses().size() != 1 || is_graph_output(x)) return false;
  if (producer->graph() != &graph) return false;
  bool folded = false;
  if (producer->kind() == OpKind::kConv) folded = fold_into_conv(graph, producer, bn);
  if (producer->kind() == OpKind::kGemm) folded = fold_into_gemm(graph, producer, bn);
  if (!folded) return false;
  return replace_node(graph, bn, x);
}

class BatchNormFolding final : public Pass {
 public:
  std::string_view name() const override { return "batchnorm_folding"; }
  Result<bool> run(Graph& graph) override { return rewrite_to_fixpoint(graph, {fold_batchnorm}); }
};

}  // namespace

std::unique_ptr<Pass> make_batchnorm_folding() {
  return std::make_unique<BatchNormFolding>();
}

}  // namespace kiln::compiler
