// SPDX-License-Identifier: Apache-2.0
// What the cuda target's lowering files share: a value's kernel element type and constant values,
// the Unary or Binary of an elementwise node, broadcast strides, a constant's NHWC bytes, and the
// small helpers that add a device step.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/kernels/elementwise.h"
#include "compiler/targets/cuda/kernels/types.h"

namespace kiln::compiler::cuda {

// The kernels' element type of a float dtype or value (f32, f16, bf16), a float constant's values
// as f32 and an integer constant's as i64, when they are such.
std::optional<Elem> elem_of(DType dtype);
std::optional<Elem> elem_of(const Value* v);
std::optional<std::vector<float>> constant_floats(const Value* v);
std::optional<std::vector<int64_t>> constant_ints(const Value* v);

// The Unary (with its alpha, beta) or Binary of an elementwise node, when it is one; the strides
// of `in` (right-aligned against `out`) per output dim, 0 where it broadcasts.
std::optional<std::pair<Unary, std::pair<float, float>>> unary_of(const Node& node);
std::optional<Binary> binary_of(OpKind kind);
void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides);

// A 4-D constant's bytes reordered from NCHW (KCRS) to NHWC (KRSC), with `channels` (at least its
// own) per pixel, the added ones zero.
std::vector<uint8_t> nhwc_bytes(const Tensor& t, int64_t channels);

// ---- for adding steps ----

// Buffer `id` of session `s` (f32, or untyped).
inline float* f32(Session& s, int id) {
  return static_cast<float*>(s.device[static_cast<size_t>(id)]);
}
inline void* ptr(Session& s, int id) {
  return s.device[static_cast<size_t>(id)];
}

// `v`'s shape (a tensor value's).
inline Shape shape_of(const Value* v) {
  return v->tensor_type().shape();
}

// The element type shared by every given value, when it is a float type.
std::optional<Elem> common_elem(std::initializer_list<const Value*> values);

// Adds a device step of `node` named `kind` (as profiles show it) reading buffers `in`, writing
// `out`, queueing `fn`.
void add(Builder& b, const Node& node, std::string kind, std::vector<int> in, std::vector<int> out,
         FunctionStep::Fn fn);

// The node of `kind` that alone reads `v`, else nullptr.
const Node* consumer_as(const Builder& b, const Value* v, OpKind kind);

// The operand of binary `node` that is not `v`, when the other one is `v`.
const Value* other_operand(const Node& node, const Value* v);

// The window of a 2-D pooling or depthwise convolution: x [N, C, H, W] to y's spatial dims through
// `g` (a 2-D geometry).
void set_window(Window2d& p, const Shape& x, const Shape& y, const WindowGeometry& g);

}  // namespace kiln::compiler::cuda
