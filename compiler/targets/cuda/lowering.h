// SPDX-License-Identifier: Apache-2.0
// The cuda target's lowering rules, a file per op family, that lower_device (lower.cc) tries in
// order. Each adds the device steps of a node (and of the nodes it fuses, which it marks) and
// returns true, or adds nothing and returns false, leaving the node to the next rule or to a host
// ref step; a Status error fails the compile.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/targets/cuda/builder.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// Lowers the 8-bit ops (QuantizeLinear, DequantizeLinear, QLinearConv, the int8 residual Add and
// MaxPool between Q/DQ) to int8 kernels when it can. Defined in quantized.cc.
Result<bool> lower_quantized(Builder& b, const Node& node);

// Adds the fused attention step when `node` ends an attention subgraph plan_attention marked;
// false for any other node. Defined in attention.cc.
bool lower_attention(Builder& b, const Node& node);

// With KILN_CUDA_NVRTC (default on), lowers `node` and the nodes around it to one kernel generated
// and compiled through NVRTC: an elementwise chain starting at `node`, with a row op (LayerNorm,
// Softmax, LogSoftmax, trailing-axis ReduceSum/Mean/Max) or a Transpose after it, or the row op or
// Transpose `node` with a chain after it. False when none applies or NVRTC fails (a warning
// logged). Defined in lower_fused.cc.
bool lower_fused(Builder& b, const Node& node);

// lower_conv.cc: a Conv on cuDNN (the algorithm timed, bias and activation fused or in one kernel
// after it), on the own tensor-core kernel where that is timed faster, or a depthwise one on its
// own kernel; NHWC where tensor cores want it (KILN_CUDA_LAYOUT).
Result<bool> lower_conv(Builder& b, const Node& node);

// lower_matmul.cc: MatMul or Gemm on cuBLASLt, with a following bias Add, scaling, residual Add,
// ReLU or GELU as its epilogue where one applies.
Result<bool> lower_matmul(Builder& b, const Node& node);

// lower_pool.cc: MaxPool and AveragePool (2-D), GlobalAveragePool and GlobalMaxPool, in their
// input's layout.
bool lower_pool(Builder& b, const Node& node);
bool lower_global_pool(Builder& b, const Node& node);

// lower_norm.cc: Softmax and LogSoftmax over the last axis, BatchNormalization (inference),
// LayerNormalization; the forms with `in` and `out` read and write those values in place of the
// node's own (the ends of a Cast pair around it, lower_in_half).
bool lower_softmax(Builder& b, const Node& node, const Value* in, const Value* out);
bool lower_softmax(Builder& b, const Node& node);
bool lower_batchnorm(Builder& b, const Node& node);
bool lower_layernorm(Builder& b, const Node& node, const Value* in, const Value* out);
bool lower_layernorm(Builder& b, const Node& node);

// lower_shape.cc: reshapes (and Identity, Dropout) share their input's buffer; Concat, Transpose,
// Slice, Split, Gather of one index and Expand are strided copies.
bool lower_alias(Builder& b, const Node& node);
bool lower_concat(Builder& b, const Node& node);
bool lower_transpose(Builder& b, const Node& node);
bool lower_slice(Builder& b, const Node& node);
bool lower_split(Builder& b, const Node& node);
bool lower_gather(Builder& b, const Node& node);
bool lower_expand(Builder& b, const Node& node);

// lower_elementwise.cc: unary ops (a Sigmoid feeding squeeze-and-excitation's scaling runs inside
// it), binary ops with broadcasting (a ReLU after them fused), Cast between float types, the op
// between the Cast pair of the fp16/bf16 conversion run in half (lower_in_half, from the first
// Cast), PyTorch's exact GELU as one step (lower_gelu, from its scaling).
bool lower_unary(Builder& b, const Node& node);
bool lower_binary(Builder& b, const Node& node);
bool lower_cast(Builder& b, const Node& node);
bool lower_in_half(Builder& b, const Node& cast);
bool lower_gelu(Builder& b, const Node& scale);

// The GELU that alone reads `x` (a Gelu op, or gelu_chain's Div and Mul by x as the only readers),
// as its nodes, for cuBLASLt's GELU epilogue: only for f16/bf16 results (the epilogue is the tanh
// approximation, at most 4.7e-4 from the exact GELU, at x = 2.7 where f16's spacing is 2e-3) and
// unless KILN_CUDA_GELU_EPILOGUE=0.
std::optional<std::vector<const Node*>> gelu_reading(const Builder& b, const Value* x);

}  // namespace kiln::compiler::cuda
