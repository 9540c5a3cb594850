// SPDX-License-Identifier: Apache-2.0
// Lowering nodes to device steps: the int8 patterns and fused attention first, then each op
// family's rule (lowering.h) by the node's kind, NVRTC-generated kernels (lower_fused.cc) where
// they apply; a node no rule takes runs as a host ref step.
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"

namespace kiln::compiler::cuda {

Result<bool> lower_device(Builder& b, const Node& node) {
  for (const Value* v : node.outputs()) {
    if (v == nullptr) return false;
  }
  KILN_ASSIGN_OR_RETURN(bool quantized, lower_quantized(b, node));
  if (quantized) return true;
  if (lower_attention(b, node)) return true;
  switch (node.kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: return lower_alias(b, node);
    case OpKind::kDropout:
      return node.num_inputs() == 1 && node.num_outputs() == 1 && lower_alias(b, node);
    case OpKind::kConv: return lower_conv(b, node);
    case OpKind::kGemm:
    case OpKind::kMatMul: return lower_matmul(b, node);
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: return lower_pool(b, node);
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool: return lower_global_pool(b, node);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: return lower_fused(b, node) || lower_softmax(b, node);
    case OpKind::kBatchNormalization: return lower_batchnorm(b, node);
    case OpKind::kConcat: return lower_concat(b, node);
    case OpKind::kTranspose: return lower_fused(b, node) || lower_transpose(b, node);
    case OpKind::kCast:
      return lower_fused(b, node) || lower_in_half(b, node) || lower_cast(b, node);
    case OpKind::kSlice: return lower_slice(b, node);
    case OpKind::kSplit: return lower_split(b, node);
    case OpKind::kGather: return lower_gather(b, node);
    case OpKind::kExpand: return lower_expand(b, node);
    case OpKind::kLayerNormalization: return lower_fused(b, node) || lower_layernorm(b, node);
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax: return lower_fused(b, node);
    default: break;
  }
  if ((node.kind() == OpKind::kDiv || node.kind() == OpKind::kMul) && lower_gelu(b, node)) {
    return true;
  }
  if (lower_fused(b, node)) return true;
  if (binary_of(node.kind())) return lower_binary(b, node);
  return lower_unary(b, node);
}

}  // namespace kiln::compiler::cuda
