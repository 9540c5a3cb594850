// SPDX-License-Identifier: Apache-2.0
// The MatMul and Gemm forms the other lowerings leave (dnnl_steps.cc's products with constant
// weights, batched_matmul.cc's f32 activation products): operands of different ranks broadcast over
// the batch dims, bf16 activations, Gemm's transposes, alpha and beta, and B and C that arrive at
// run time. One oneDNN matmul step over plain operands (transposed ones read through strides):
// alpha is the output scale, C a binary post-op, beta a linear post-op around it.
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// Leading 1s up to `rank`.
memory::dims padded(const Shape& s, int rank) {
  memory::dims dims(static_cast<size_t>(rank - s.rank()), 1);
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  return dims;
}

}  // namespace

bool lower_general_matmul(ProgramBuilder& b, const Node& node) {
  const bool gemm = node.kind() == OpKind::kGemm;
  if ((!gemm && node.kind() != OpKind::kMatMul) || node.num_inputs() < 2 ||
      node.num_inputs() > (gemm ? 3 : 2) || !node.has_input(0) ||
      !same_float({node.input(0), node.input(1), node.output(0)})) {
    return false;
  }
  const DType type = dtype(node.output(0));
  const memory::data_type dt = dnnl_type(type);
  const Shape& a = node.input(0)->tensor_type().shape();
  const Shape& w = node.input(1)->tensor_type().shape();
  const Shape& y = node.output(0)->tensor_type().shape();
  memory::desc src;
  memory::desc weights;
  const memory::desc dst = plain_desc(y, type);
  dnnl::primitive_attr attr = scratchpad_attr();
  dnnl::post_ops post;
  const Value* c = nullptr;  // Gemm's C, added as a binary post-op
  memory::desc c_desc;
  if (!gemm) {
    if (a.rank() < 2 || w.rank() < 2 || y.rank() != std::max(a.rank(), w.rank())) return false;
    src = plain_desc(padded(a, y.rank()), type);
    weights = plain_desc(padded(w, y.rank()), type);
  } else {
    const auto& op = node.attrs<ops::Gemm>();
    if (a.rank() != 2 || w.rank() != 2 || y.rank() != 2) return false;
    const int64_t m = y[0];
    const int64_t n = y[1];
    const int64_t k = op.transA ? a[0] : a[1];
    src = memory::desc({m, k}, dt, op.transA ? memory::dims{1, m} : memory::dims{k, 1});
    weights = memory::desc({k, n}, dt, op.transB ? memory::dims{1, k} : memory::dims{n, 1});
    const bool with_c = node.has_input(2) && op.beta != 0.0f;
    if (with_c) {
      c = node.input(2);
      if (!is_float(c) || dtype(c) != type || c->tensor_type().shape().rank() > 2) return false;
      const memory::dims c_dims = padded(c->tensor_type().shape(), 2);
      if ((c_dims[0] != 1 && c_dims[0] != m) || (c_dims[1] != 1 && c_dims[1] != n)) return false;
      c_desc = plain_desc(c_dims, type);
    }
    // alpha * A.B + beta * C = beta * (alpha / beta * A.B + C).
    const float scale = with_c ? op.alpha / op.beta : op.alpha;
    if (scale != 1.0f) attr.set_output_scales(0, {scale});
    if (with_c) post.append_binary(dnnl::algorithm::binary_add, c_desc);
    if (with_c && op.beta != 1.0f) {
      post.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, op.beta, 0.0f);
    }
  }
  attr.set_post_ops(post);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attr, b.engine());

  std::vector<PrimitiveStep::Arg> args;
  args.push_back({DNNL_ARG_SRC, b.plain(node.input(0)), src, {}});
  if (const Tensor* constant = node.input(1)->constant_value()) {
    args.push_back(
        {DNNL_ARG_WEIGHTS, -1, weights, pack(b.engine(), weights, constant->raw_data(), weights)});
  } else {
    args.push_back({DNNL_ARG_WEIGHTS, b.plain(node.input(1)), weights, {}});
  }
  if (c != nullptr) {
    const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
    if (const Tensor* constant = c->constant_value()) {
      args.push_back({arg, -1, c_desc, pack(b.engine(), c_desc, constant->raw_data(), c_desc)});
    } else {
      args.push_back({arg, b.plain(c), c_desc, {}});
    }
  }
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), dst), dst, {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, std::string(node.op().name()), dnnl::matmul(pd), std::move(args), Tail{});
  return true;
}

}  // namespace kiln::compiler::cpu
