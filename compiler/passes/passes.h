// SPDX-License-Identifier: Apache-2.0
// The generic passes every target starts from, one file each in passes/.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "compiler/passes/pass.h"

namespace kiln::compiler {

// Removes nodes none of whose outputs are used or returned.
std::unique_ptr<Pass> make_dead_code_elimination();
// Evaluates nodes whose inputs are all constants (with the ref kernels) and Shape/Size of static
// shapes, replacing them by Constant nodes. Random ops, results above `max_elements` and
// DequantizeLinear of 8-bit constants (quantized weights, for qdq_fusion to find) stay, unless
// `quantized_weights`: after qdq_fusion, the ones left feed float ops, which would dequantize
// them at every run.
std::unique_ptr<Pass> make_constant_folding(int64_t max_elements = int64_t{1} << 24,
                                            bool quantized_weights = false);
// Merges nodes with the same op, attributes and inputs (equal constants included).
std::unique_ptr<Pass> make_common_subexpression_elimination();
// Local rewrites to a fixpoint: x*1, x+0, x-0, x/1, Identity, Dropout in inference, Cast to the
// same type, Transpose of Transpose, Reshape of Reshape, Reshape to the same shape.
std::unique_ptr<Pass> make_algebraic_simplification();
// Folds an inference BatchNormalization with constant parameters into the preceding Conv (or
// Gemm) with constant weights when the BatchNormalization is that node's only user.
std::unique_ptr<Pass> make_batchnorm_folding();

// Folds a zero Pad of the spatial dims whose only reader is a Conv into the Conv's pads (what
// tf2onnx writes for TensorFlow's "same" padding of strided convolutions); the Pad is left dead.
std::unique_ptr<Pass> make_pad_conv_fusion();

// Marks a Conv whose only use is a Relu as Conv[activation="Relu"] and removes the Relu (targets
// with fused kernels run it; the ref Conv kernel honours the field too).
std::unique_ptr<Pass> make_conv_activation_fusion();

// Runs a channel Concat's sole consumer on each piece, so that nothing copies the pieces together:
// MaxPool/AveragePool(Concat(xs)) becomes Concat(Pool(x) for each x), and a Conv with group 1,
// constant weights and no more outputs than inputs, over a Concat of up to 4 pieces of 16 or more
// channels, becomes a sum of Convs over the pieces (Conv(x1, W1, B) + Conv(x2, W2) + ...), which
// the cpu target runs as sum post-ops. Meant to run before conv_activation_fusion (a fused Conv is
// left as it is).
std::unique_ptr<Pass> make_concat_distribution();
// Runs an AveragePool without padding before the pointwise Conv (1x1, unit strides, no padding,
// no fused activation) that only it reads: AveragePool(Conv(x, W, B)) becomes
// Conv(AveragePool(x), W, B), the same values with the Conv's work divided by the pool's
// (DenseNet's transitions: by 4).
std::unique_ptr<Pass> make_pool_before_pointwise_conv();
// Rewrites LayerNorm as exporters before opset 17 write it — ReduceMean, Sub, Pow (or Mul of the
// difference by itself), ReduceMean, Add epsilon, Sqrt, Div, then a Mul by a constant scale and an
// Add of a constant bias over the last axis, each optional — into one LayerNormalization node.
std::unique_ptr<Pass> make_layer_norm_fusion();

// Rewrites quantized regions to integer ops: QuantizeLinear(Conv(DequantizeLinear(x),
// DequantizeLinear(w), bias)) (a Relu before the QuantizeLinear absorbed when its zero point is
// the type's lowest value) to QLinearConv, the same around MatMul to QLinearMatMul, and drops
// QuantizeLinear(DequantizeLinear(x)) pairs of equal parameters, also around ops that only move
// elements (Reshape, Flatten, Transpose, Squeeze, Unsqueeze), and with `max_pools` around MaxPool
// (for a target with 8-bit max pooling: the cpu target's; the cuda target lowers DQ -> MaxPool ->
// Q itself). Activations need per-tensor constant parameters; weights are 8-bit constants with
// per-tensor or per-output-channel scales.
// `grouped_convs` false leaves grouped convolutions other than depthwise ones in QDQ form, for a
// target whose int8 kernels take group 1 and depthwise only (the cuda target: the others then run
// on its float kernels, on the GPU).
// `silu_convs`, for a target whose int8 convolutions apply a SiLU in their epilogue (the cuda
// target): Q(Mul(y, Sigmoid(y))) with y = Conv(DQ(x), DQ(w), bias), read by nothing else, becomes a
// QLinearConv with kiln's activation "SiLU" where silu_convs(the Conv) says the target runs it so.
std::unique_ptr<Pass> make_qdq_fusion(bool max_pools = false, bool grouped_convs = true,
                                      std::function<bool(const Node&)> silu_convs = {});

// Replaces an If whose condition is a constant by the nodes of the branch it takes (inside
// subgraphs too); a graph output the If returned keeps its name.
std::unique_ptr<Pass> make_if_folding();

// Computes in float32 what a float16 graph (one with a Conv, MatMul, Gemm or recurrence on float16
// values) computes in float16: constants and value types become float32, float16 graph inputs and
// outputs keep their type through a Cast at the edge. For a target without float16 kernels; the
// results are closer to the float32 model's than float16 arithmetic is.
std::unique_ptr<Pass> make_float16_widening();

// Gives an If whose outputs have no static types, because one of its branches does not type-check
// for the shapes given while the other does, the output types of the branch that does (Silero
// VAD v5's 8 kHz branch, given a 16 kHz window). For a target that plans the If with those types
// and runs the other branch, should it be taken, where types are found at run time.
std::unique_ptr<Pass> make_if_output_typing();

// Re-infers output types that rewrites made computable (a Reshape whose shape was folded into a
// constant), keeping every type that is already static, and constant-folds what that makes
// constant (and folds Ifs whose condition became constant), to a fixpoint; changed when a type
// became static. Inside If branches a node that does not type-check keeps its types: the error
// is left to run time, for the case that the branch runs.
std::unique_ptr<Pass> make_type_refinement();

// The target-independent clean-up pipeline, in order.
std::vector<std::unique_ptr<Pass>> standard_passes();

}  // namespace kiln::compiler
