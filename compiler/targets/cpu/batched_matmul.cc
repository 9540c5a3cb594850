// SPDX-License-Identifier: Apache-2.0
// MatMul of two activations (attention's Q·Kᵀ and P·V) as one oneDNN matmul step: strided views
// (Split, Transpose; views.cc) are read as they are, the output is written transposed when a
// Transpose is its only reader, and a scale, a mask Add and eltwise nodes run as post-ops.
#include <string>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

bool is_static_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().numel() > 0;
}

bool has_inner_blocks(const memory::desc& layout) {
  return layout.data.format_kind != dnnl_blocked ||
         layout.data.format_desc.blocking.inner_nblks != 0;
}

// An Add of `x` and a tensor that broadcasts to `x`'s shape (an attention mask), run as a binary
// post-op; nullptr when the node after `x` is not one.
const Node* mask_add(ProgramBuilder& b, const Value* x) {
  const Node* add = sole_user(x);
  if (add == nullptr || add->kind() != OpKind::kAdd || add->num_inputs() != 2) return nullptr;
  const Value* m = add->input(add->input(0) == x ? 1 : 0);
  if (m == x || !is_static_f32(m) || !is_static_f32(add->output(0)) || !b.has_buffer(m)) {
    return nullptr;
  }
  const Shape& xs = x->tensor_type().shape();
  const Shape& ms = m->tensor_type().shape();
  if (add->output(0)->tensor_type().shape() != xs || ms.rank() > xs.rank()) return nullptr;
  for (int i = 0; i < ms.rank(); ++i) {
    const int64_t d = ms[ms.rank() - 1 - i];
    if (d != 1 && d != xs[xs.rank() - 1 - i]) return nullptr;
  }
  return add;
}

// Strides for an output of `shape` that `transpose` turns into row-major data.
std::optional<memory::dims> transposed_strides(const Node& transpose, const Shape& shape) {
  std::vector<int64_t> perm =
      transpose.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int i = shape.rank(); i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != shape.rank()) return std::nullopt;
  memory::dims strides(perm.size(), 0);
  memory::dim stride = 1;
  for (size_t i = perm.size(); i-- > 0;) {
    if (perm[i] < 0 || perm[i] >= shape.rank() || strides[static_cast<size_t>(perm[i])] != 0) {
      return std::nullopt;
    }
    strides[static_cast<size_t>(perm[i])] = stride;
    stride *= shape[static_cast<int>(perm[i])];
  }
  return strides;
}

}  // namespace

bool lower_batched_matmul(ProgramBuilder& b, const Node& node) {
  if (node.kind() != OpKind::kMatMul || node.num_inputs() != 2) return false;
  const Value* a = node.input(0);
  const Value* w = node.input(1);
  const Value* y = node.output(0);
  if (!is_static_f32(a) || !is_static_f32(w) || !is_static_f32(y)) return false;
  if (!b.has_buffer(a) || !b.has_buffer(w)) return false;
  const Shape& ys = y->tensor_type().shape();
  const int rank = ys.rank();
  if (rank < 2 || rank > DNNL_MAX_NDIMS || a->tensor_type().shape().rank() != rank ||
      w->tensor_type().shape().rank() != rank) {
    return false;
  }

  Tail tail = trailing_eltwise(y);
  const Node* mask = mask_add(b, tail.out);
  dnnl::primitive_attr attr = scratchpad_attr();
  dnnl::post_ops post;
  append(post, tail.ops);
  memory::desc mask_desc;
  const Value* m = nullptr;  // the mask
  if (mask != nullptr) {
    m = mask->input(mask->input(0) == tail.out ? 1 : 0);
    const Shape& ms = m->tensor_type().shape();
    memory::dims dims(static_cast<size_t>(rank - ms.rank()), 1);
    for (int i = 0; i < ms.rank(); ++i) dims.push_back(ms[i]);
    mask_desc = plain_desc(dims);
    post.append_binary(dnnl::algorithm::binary_add, mask_desc);
    tail.nodes.push_back(mask);
    tail.kinds += "+Add";
    tail.out = mask->output(0);
  }
  attr.set_post_ops(post);

  // Operands in their own strided layouts and the output transposed for the Transpose after it,
  // unless oneDNN would run that on its reference kernel: then plain.
  memory::desc dst = plain_desc(ys);
  if (const Node* t = sole_user(tail.out); t != nullptr && t->kind() == OpKind::kTranspose) {
    if (std::optional<memory::dims> strides = transposed_strides(*t, ys)) {
      dst = memory::desc(to_dims(ys), memory::data_type::f32, *strides);
    }
  }
  auto strided = [&](const Value* v) {
    const memory::desc layout = b.layout_of(v);
    return has_inner_blocks(layout) ? plain_desc(v->tensor_type().shape()) : layout;
  };
  memory::desc src = strided(a);
  memory::desc weights = strided(w);
  auto make = [&] {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, b.engine());
  };
  dnnl::matmul::primitive_desc pd = make();
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) {
    src = plain_desc(a->tensor_type().shape());
    weights = plain_desc(w->tensor_type().shape());
    dst = plain_desc(ys);
    pd = make();
  }

  std::vector<PrimitiveStep::Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(a, src), src, {}});
  args.push_back({DNNL_ARG_WEIGHTS, b.in_layout(w, weights), weights, {}});
  if (m != nullptr) {
    const int index = static_cast<int>(tail.ops.size());
    args.push_back(
        {DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, b.plain(m), mask_desc, {}});
  }
  args.push_back({DNNL_ARG_DST, b.define(tail.out, dst), dst, {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, "MatMul", dnnl::matmul(pd), std::move(args), tail);
  return true;
}

}  // namespace kiln::compiler::cpu
