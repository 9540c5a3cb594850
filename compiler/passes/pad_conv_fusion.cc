// SPDX-License-Identifier: Apache-2.0
// Pad-Conv fusion: a zero Pad of the spatial dims whose only reader is a Conv becomes the Conv's
// own padding (TensorFlow's "same" padding of strided convolutions, which tf2onnx writes as an
// explicit Pad of the bottom and right edges before a Conv without pads: MobileNetV2 backbones).
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"

namespace kiln::compiler {

namespace {

// The constant integer values of `v`, or nullopt.
std::optional<std::vector<int64_t>> ints_of(const Value* v) {
  const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
  if (t == nullptr || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->numel(); ++i) {
    out.push_back(t->dtype() == DType::kI64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]);
  }
  return out;
}

// Conv(Pad(x, pads, 0), W, ...) with the Pad's output read by the Conv alone, zero pads on the
// batch and channel dims and none negative  ==>  Conv[pads += the Pad's](x, W, ...).
Result<bool> fuse_pad(Graph& graph, Node* conv) {
  if (conv->kind() != OpKind::kConv || !conv->has_input(0)) return false;
  Value* padded = conv->input(0);
  Node* pad = padded->producer();
  if (pad == nullptr || pad->kind() != OpKind::kPad || pad->graph() != &graph ||
      padded->uses().size() != 1 || is_graph_output(padded)) {
    return false;
  }
  if (pad->attrs<ops::Pad>().mode != "constant" || !pad->has_input(1)) return false;
  if (pad->has_input(2) && !is_constant_filled_with(pad->input(2), 0.0)) return false;
  Value* x = pad->input(0);
  if (!x->type().is_tensor() || !x->tensor_type().has_rank()) return false;
  const int rank = x->tensor_type().rank();
  std::optional<std::vector<int64_t>> pads = ints_of(pad->input(1));
  if (!pads) return false;
  // Opset 18's axes: the pads of those axes only.
  std::vector<int64_t> axes;
  if (pad->has_input(3)) {
    std::optional<std::vector<int64_t>> given = ints_of(pad->input(3));
    if (!given) return false;
    axes = *given;
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads->size() != 2 * axes.size()) return false;
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0);
  std::vector<int64_t> end(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank) return false;
    begin[static_cast<size_t>(axis)] = (*pads)[i];
    end[static_cast<size_t>(axis)] = (*pads)[axes.size() + i];
  }
  for (int i = 0; i < rank; ++i) {
    if (begin[static_cast<size_t>(i)] < 0 || end[static_cast<size_t>(i)] < 0) return false;
    if (i < 2 && (begin[static_cast<size_t>(i)] != 0 || end[static_cast<size_t>(i)] != 0)) {
      return false;
    }
  }
  ops::Conv attrs = conv->attrs<ops::Conv>();
  if (attrs.auto_pad != "NOTSET" && attrs.auto_pad != "VALID") return false;
  const int spatial = rank - 2;
  std::vector<int64_t> conv_pads =
      attrs.pads.value_or(std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0));
  if (attrs.auto_pad == "VALID") conv_pads.assign(static_cast<size_t>(2 * spatial), 0);
  if (conv_pads.size() != static_cast<size_t>(2 * spatial)) return false;
  for (int i = 0; i < spatial; ++i) {
    conv_pads[static_cast<size_t>(i)] += begin[static_cast<size_t>(i + 2)];
    conv_pads[static_cast<size_t>(spatial + i)] += end[static_cast<size_t>(i + 2)];
  }
  attrs.auto_pad = "NOTSET";
  attrs.pads = conv_pads;
  conv->set_op(Op(std::move(attrs)));
  conv->set_input(0, x);  // the Pad, unused now, is left to dead-code elimination
  return true;
}

class PadConvFusion final : public Pass {
 public:
  std::string_view name() const override { return "pad_conv_fusion"; }
  Result<bool> run(Graph& graph) override { return rewrite_to_fixpoint(graph, {fuse_pad}); }
};

}  // namespace

std::unique_ptr<Pass> make_pad_conv_fusion() {
  return std::make_unique<PadConvFusion>();
}

}  // namespace kiln::compiler
