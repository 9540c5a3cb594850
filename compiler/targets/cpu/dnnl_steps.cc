// SPDX-License-Identifier: Apache-2.0
// Lowering nodes to oneDNN steps of a Program: which lowering each node kind tries (convolutions
// in lower_conv.cc), and pooling, binary, eltwise, concat, batch/layer norm, softmax and matmul,
// reading and writing the blocked layouts oneDNN picks so that whole regions run without reorders.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/excitation.h"
#include "compiler/targets/cpu/lower_conv.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"
#include "core/env.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;
using Arg = PrimitiveStep::Arg;

// Whether `a` and `b` are static 8-bit tensors of one type (a MaxPool of quantized data).
bool same_8bit(const Value* a, const Value* b) {
  auto eight = [](const Value* v) {
    return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static() &&
           (v->tensor_type().dtype == DType::kU8 || v->tensor_type().dtype == DType::kI8);
  };
  return eight(a) && eight(b) && dtype(a) == dtype(b);
}

bool lower_pool(ProgramBuilder& b, const Node& node) {
  const bool int8_max = node.kind() == OpKind::kMaxPool && same_8bit(node.input(0), node.output(0));
  if (!int8_max && !same_float({node.input(0), node.output(0)})) return false;
  const memory::desc src = b.layout_of(node.input(0));
  std::optional<dnnl::pooling_v2_forward::desc> desc =
      pool_desc(node, src, any_desc(node.output(0)->tensor_type().shape(), dtype(node.output(0))));
  if (!desc) return false;
  dnnl::pooling_v2_forward::primitive_desc pd(*desc, scratchpad_attr(), b.engine());
  // Plain NCHW pools on oneDNN's reference kernel: one channel is NHWC as it lies (the same
  // bytes: M-LSD's 3x3 peak pooling of its line map), more go channels-last.
  const memory::dims x_dims = src.dims();
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos && x_dims.size() == 4 &&
      is_row_major(src)) {
    const memory::desc nhwc(x_dims, src.data_type(), memory::format_tag::nhwc);
    if (std::optional<dnnl::pooling_v2_forward::desc> d = pool_desc(
            node, nhwc, any_desc(node.output(0)->tensor_type().shape(), dtype(node.output(0))))) {
      dnnl::pooling_v2_forward::primitive_desc fast(*d, scratchpad_attr(), b.engine());
      if (std::string(fast.impl_info_str()).find("ref") == std::string::npos) pd = fast;
    }
  }
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(node.input(0), pd.src_desc()), pd.src_desc(), {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), pd.dst_desc()), pd.dst_desc(), {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, std::string(node.op().name()), dnnl::pooling_v2_forward(pd), std::move(args),
         Tail{});
  return true;
}

// `s` with leading 1s up to `rank` dims.
memory::dims broadcast_dims(const Shape& s, int rank) {
  memory::dims dims(static_cast<size_t>(std::max(rank, 1) - s.rank()), 1);
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  return dims;
}

bool lower_binary(ProgramBuilder& b, const Node& node) {
  if (node.num_inputs() != 2 || !same_float({node.input(0), node.input(1), node.output(0)})) {
    return false;
  }
  const DType type = dtype(node.output(0));
  dnnl::algorithm algorithm;
  bool commutes = true;
  switch (node.kind()) {
    case OpKind::kAdd: algorithm = dnnl::algorithm::binary_add; break;
    case OpKind::kMul: algorithm = dnnl::algorithm::binary_mul; break;
    case OpKind::kMax: algorithm = dnnl::algorithm::binary_max; break;
    case OpKind::kMin: algorithm = dnnl::algorithm::binary_min; break;
    case OpKind::kSub: algorithm = dnnl::algorithm::binary_sub, commutes = false; break;
    case OpKind::kDiv: algorithm = dnnl::algorithm::binary_div, commutes = false; break;
    default: return false;
  }
  const Shape& y = node.output(0)->tensor_type().shape();
  const Value* first = node.input(0);
  const Value* second = node.input(1);
  if (first->tensor_type().shape() != y) {
    if (!commutes || second->tensor_type().shape() != y) return false;
    std::swap(first, second);
  }
  if (second->tensor_type().shape().rank() > y.rank()) return false;
  const bool same = second->tensor_type().shape() == y;
  const Tail tail = trailing_eltwise(node.output(0));
  dnnl::primitive_attr attr = scratchpad_attr();
  if (!tail.ops.empty()) {
    dnnl::post_ops post;
    append(post, tail.ops);
    attr.set_post_ops(post);
  }
  // `first_layout` channel-blocked by 16 and the second operand blocked alike; nullopt when that
  // does not apply or oneDNN has no fast kernel for it.
  auto blocked_broadcast = [&](const memory::desc& src0, const Shape& s1,
                               int rank) -> std::optional<dnnl::binary::primitive_desc> {
    const dnnl_memory_desc_t& md = src0.data;
    if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 1 ||
        md.format_desc.blocking.inner_idxs[0] != 1 || md.format_desc.blocking.inner_blks[0] != 16 ||
        (rank != 4 && rank != 5)) {
      return std::nullopt;
    }
    const memory::format_tag tag =
        rank == 4 ? memory::format_tag::nChw16c : memory::format_tag::nCdhw16c;
    try {
      const memory::desc src1(broadcast_dims(s1, rank), src0.data_type(), tag);
      dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm, src0, src1, src0), attr,
                                      b.engine());
      if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) return std::nullopt;
      return pd;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  // The first operand's layout, when oneDNN broadcasts the second over it; else plain.
  auto make = [&](const memory::desc& src0) {
    const memory::desc src1 =
        same ? src0 : plain_desc(broadcast_dims(second->tensor_type().shape(), y.rank()), type);
    return dnnl::binary::primitive_desc(dnnl::binary::desc(algorithm, src0, src1, src0), attr,
                                        b.engine());
  };
  std::optional<dnnl::binary::primitive_desc> pd;
  const memory::desc first_layout = b.layout_of(first);
  try {
    pd = make(first_layout);
    if (!same && std::string(pd->impl_info_str()).find("ref") != std::string::npos) pd.reset();
  } catch (const dnnl::error&) {
    pd.reset();
  }
  // A per-channel operand ([N, C, 1, 1], as in squeeze-and-excitation) over a channel-blocked
  // input: oneDNN's fast kernels want it blocked the same way (a tiny reorder).
  if (!pd && !same) pd = blocked_broadcast(first_layout, second->tensor_type().shape(), y.rank());
  if (!pd) pd = make(plain_desc(y, type));
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC_0, b.in_layout(first, pd->src0_desc()), pd->src0_desc(), {}});
  const int src1 = same || !is_row_major(pd->src1_desc()) ? b.in_layout(second, pd->src1_desc())
                                                          : b.plain(second);
  args.push_back({DNNL_ARG_SRC_1, src1, pd->src1_desc(), {}});
  args.push_back({DNNL_ARG_DST, b.define(tail.out, pd->dst_desc()), pd->dst_desc(), {}});
  if (int sp = b.scratch(pd->scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd->scratchpad_desc(), {}});
  }
  finish(b, node, std::string(node.op().name()), dnnl::binary(*pd), std::move(args), tail);
  return true;
}

bool lower_eltwise(ProgramBuilder& b, const Node& node) {
  std::optional<Eltwise> e = eltwise_of(node);
  if (!e) return false;
  const memory::desc src = b.layout_of(node.input(0));
  dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, e->algorithm, src, e->alpha,
                                  e->beta),
      scratchpad_attr(), b.engine());
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), pd.dst_desc()), pd.dst_desc(), {}});
  finish(b, node, std::string(node.op().name()), dnnl::eltwise_forward(pd), std::move(args),
         Tail{});
  return true;
}

// A row-major layout of `shape` with the dims in the order of `layout`'s strides, when `layout` is
// a permutation of plain (no inner blocks) other than plain itself.
std::optional<memory::desc> permuted_like(const memory::desc& layout, const Shape& shape) {
  const dnnl_memory_desc_t& md = layout.data;
  if (layout.is_zero() || md.format_kind != dnnl_blocked ||
      md.format_desc.blocking.inner_nblks != 0 || md.ndims != shape.rank() ||
      is_row_major(layout)) {
    return std::nullopt;
  }
  std::vector<int> order(static_cast<size_t>(md.ndims));
  for (int i = 0; i < md.ndims; ++i) order[static_cast<size_t>(i)] = i;
  // Outermost first: larger strides first, ties by dim index.
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
    return md.format_desc.blocking.strides[a] > md.format_desc.blocking.strides[c];
  });
  memory::dims strides(static_cast<size_t>(md.ndims));
  memory::dim stride = 1;
  for (int i = md.ndims; i-- > 0;) {
    const int d = order[static_cast<size_t>(i)];
    strides[static_cast<size_t>(d)] = stride;
    stride *= shape[d];
  }
  return memory::desc(to_dims(shape), memory::data_type::f32, strides);
}

bool lower_concat(ProgramBuilder& b, const Node& node) {
  if (!is_f32(node.output(0)) || node.num_inputs() < 1) return false;
  const int rank = node.output(0)->tensor_type().shape().rank();
  int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  std::vector<const Value*> inputs;
  for (const Value* v : node.inputs()) {
    if (!is_f32(v) || v->tensor_type().shape().rank() != rank) return false;
    if (v->tensor_type().shape().numel() == 0) return false;
    inputs.push_back(v);
  }
  auto make = [&](bool keep_layouts) {
    std::vector<memory::desc> srcs;
    for (const Value* v : inputs) {
      srcs.push_back(keep_layouts ? b.layout_of(v) : plain_desc(v->tensor_type().shape()));
    }
    return dnnl::concat::primitive_desc(static_cast<int>(axis), srcs, b.engine(),
                                        scratchpad_attr());
  };
  std::optional<dnnl::concat::primitive_desc> pd;
  // The output in the dim order of an input that is not row-major (e.g. NHWC between convs that
  // prefer it), so the region stays in that layout; else oneDNN picks.
  const Shape& y = node.output(0)->tensor_type().shape();
  for (const Value* v : inputs) {
    std::optional<memory::desc> dst = permuted_like(b.layout_of(v), y);
    if (!dst) continue;
    try {
      std::vector<memory::desc> srcs;
      for (const Value* in : inputs) srcs.push_back(b.layout_of(in));
      pd = dnnl::concat::primitive_desc(*dst, static_cast<int>(axis), srcs, b.engine(),
                                        scratchpad_attr());
      break;
    } catch (const dnnl::error&) {
      pd.reset();
    }
  }
  if (!pd) {
    try {
      pd = make(true);
    } catch (const dnnl::error&) {
      pd = make(false);
    }
  }
  std::vector<Arg> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const memory::desc want = pd->src_desc(static_cast<int>(i));
    args.push_back(
        {DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), b.in_layout(inputs[i], want), want, {}});
  }
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), pd->dst_desc()), pd->dst_desc(), {}});
  if (int sp = b.scratch(pd->scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd->scratchpad_desc(), {}});
  }
  finish(b, node, "Concat", dnnl::concat(*pd), std::move(args), Tail{});
  return true;
}

bool unused(const Node& node, int output) {
  return output >= node.num_outputs() ||
         (node.output(output)->uses().empty() && !is_graph_output(node.output(output)));
}

// Inference BatchNormalization with constant statistics (a Relu after it fused).
bool lower_batch_norm(ProgramBuilder& b, const Node& node) {
  const auto& op = node.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0 || node.num_inputs() != 5 || !is_f32(node.input(0)) ||
      !is_f32(node.output(0))) {
    return false;
  }
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (!unused(node, i)) return false;
  }
  const Shape& x = node.input(0)->tensor_type().shape();
  if (x.rank() < 2) return false;
  const Tensor* params[4];
  for (int i = 0; i < 4; ++i) {
    params[i] = node.input(i + 1)->constant_value();
    if (params[i] == nullptr || params[i]->dtype() != DType::kF32 || params[i]->numel() != x[1]) {
      return false;
    }
  }
  Tail tail = trailing_eltwise(node.output(0), 1);
  const bool relu = !tail.ops.empty() && tail.ops[0].algorithm == dnnl::algorithm::eltwise_relu &&
                    tail.ops[0].alpha == 0.0f;
  if (!relu) {
    tail = Tail{};
    tail.out = node.output(0);
  }
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  if (relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
  const memory::desc src = b.layout_of(node.input(0));
  dnnl::batch_normalization_forward::primitive_desc pd(
      dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, src, op.epsilon,
                                              flags),
      scratchpad_attr(), b.engine());
  const memory::desc c = plain_desc(Shape{x[1]});
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_SCALE, -1, c, constant_memory(b.engine(), *params[0], c)});
  args.push_back({DNNL_ARG_SHIFT, -1, c, constant_memory(b.engine(), *params[1], c)});
  args.push_back({DNNL_ARG_MEAN, -1, c, constant_memory(b.engine(), *params[2], c)});
  args.push_back({DNNL_ARG_VARIANCE, -1, c, constant_memory(b.engine(), *params[3], c)});
  args.push_back({DNNL_ARG_DST, b.define(tail.out, pd.dst_desc()), pd.dst_desc(), {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, "BatchNormalization", dnnl::batch_normalization_forward(pd), std::move(args),
         tail);
  return true;
}

// LayerNormalization over the last axis, with constant scale and bias.
bool lower_layer_norm(ProgramBuilder& b, const Node& node) {
  const auto& op = node.attrs<ops::LayerNormalization>();
  if (!is_f32(node.input(0)) || !is_f32(node.output(0)) || unused(node, 0)) return false;
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (!unused(node, i)) return false;
  }
  const Shape& x = node.input(0)->tensor_type().shape();
  if (x.rank() < 2 || (op.axis != -1 && op.axis != x.rank() - 1)) return false;
  const Tensor* scale = node.has_input(1) ? node.input(1)->constant_value() : nullptr;
  const Tensor* bias = node.has_input(2) ? node.input(2)->constant_value() : nullptr;
  const int64_t c = x[x.rank() - 1];
  if (scale == nullptr || scale->dtype() != DType::kF32 || scale->numel() != c) return false;
  if (node.has_input(2) &&
      (bias == nullptr || bias->dtype() != DType::kF32 || bias->numel() != c)) {
    return false;
  }
  auto flags = dnnl::normalization_flags::use_scale;
  if (bias != nullptr) flags |= dnnl::normalization_flags::use_shift;
  const memory::desc src = plain_desc(x);
  dnnl::layer_normalization_forward::primitive_desc pd(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, src, op.epsilon,
                                              flags),
      scratchpad_attr(), b.engine());
  const memory::desc cd = plain_desc(Shape{c});
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.plain(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_SCALE, -1, cd, constant_memory(b.engine(), *scale, cd)});
  if (bias != nullptr) {
    args.push_back({DNNL_ARG_SHIFT, -1, cd, constant_memory(b.engine(), *bias, cd)});
  }
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), pd.dst_desc()), pd.dst_desc(), {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, "LayerNormalization", dnnl::layer_normalization_forward(pd), std::move(args),
         Tail{});
  return true;
}

// Softmax over the last axis (where every opset's definition agrees).
bool lower_softmax(ProgramBuilder& b, const Node& node) {
  if (!is_f32(node.input(0)) || !is_f32(node.output(0))) return false;
  const Shape& x = node.input(0)->tensor_type().shape();
  const int64_t axis = node.attrs<ops::Softmax>().axis;
  if (x.rank() < 1 || (axis != -1 && axis != x.rank() - 1) || x.numel() == 0) return false;
  const memory::desc src = plain_desc(x);
  dnnl::softmax_v2_forward::primitive_desc pd(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::softmax_accurate, src, src,
                                     static_cast<int>(x.rank() - 1)),
      scratchpad_attr(), b.engine());
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.plain(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), src), src, {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, "Softmax", dnnl::softmax_v2_forward(pd), std::move(args), Tail{});
  return true;
}

// MatMul [..., M, K] x constant [K, N] as one [M', K] x [K, N] product with the weights packed,
// and a following Add of a constant [N] bias and eltwise tail (GELU, Relu, ...) fused in; also
// Gemm(A, constant B, constant C) with transA = 0 and alpha = beta = 1. f32 or bf16 (then on
// oneDNN's bf16 kernels, with an f32 bias).
bool lower_matmul(ProgramBuilder& b, const Node& node) {
  const bool gemm = node.kind() == OpKind::kGemm;
  if (node.num_inputs() < 2 || node.num_inputs() > (gemm ? 3 : 2) ||
      !same_float({node.input(0), node.input(1), node.output(0)})) {
    return false;
  }
  const DType type = dtype(node.output(0));
  bool trans_b = false;
  if (gemm) {
    const auto& op = node.attrs<ops::Gemm>();
    if (op.transA != 0 || op.alpha != 1.0f || (node.has_input(2) && op.beta != 1.0f)) return false;
    trans_b = op.transB != 0;
  }
  const Tensor* w = node.input(1)->constant_value();
  if (w == nullptr || w->shape().rank() != 2) return false;
  const Shape& a = node.input(0)->tensor_type().shape();
  const Shape& y = node.output(0)->tensor_type().shape();
  if (a.rank() < 2 || (gemm && a.rank() != 2)) return false;
  const int64_t k = a[a.rank() - 1];
  const int64_t n = w->shape()[trans_b ? 0 : 1];
  if (k == 0 || n == 0 || w->shape()[trans_b ? 1 : 0] != k || a.numel() == 0) return false;
  const int64_t m = a.numel() / k;

  // A bias of n values: Gemm's C, or the constant of a following Add over the last dim.
  auto as_row = [n](const Tensor* t) -> const Tensor* {
    if (t == nullptr || (t->dtype() != DType::kF32 && t->dtype() != DType::kBF16) ||
        t->numel() != n || t->rank() < 1) {
      return nullptr;
    }
    for (int i = 0; i + 1 < t->rank(); ++i) {
      if (t->shape()[i] != 1) return nullptr;
    }
    return t;
  };
  const Node* add = nullptr;
  const Tensor* bias = nullptr;
  if (gemm && node.has_input(2)) {
    bias = as_row(node.input(2)->constant_value());
    if (bias == nullptr) return false;
  } else if (!gemm) {
    add = sole_user(node.output(0));
    if (add != nullptr && add->kind() == OpKind::kAdd && add->num_inputs() == 2 &&
        same_float({add->output(0), node.output(0)}) &&
        add->output(0)->tensor_type().shape() == y) {
      const Value* other = other_input(*add, node.output(0));
      bias = other != nullptr ? as_row(other->constant_value()) : nullptr;
    }
    if (bias == nullptr) add = nullptr;
  }
  // Then an Add of a tensor of the output's shape (a residual) as a sum post-op.
  const Value* sum = add != nullptr ? add->output(0) : node.output(0);
  const Node* residual_add = sole_user(sum);
  const Value* residual = nullptr;
  if (residual_add != nullptr && residual_add->kind() == OpKind::kAdd) {
    residual = other_input(*residual_add, sum);
    if (residual == nullptr || residual == sum ||
        !same_float({residual, residual_add->output(0), node.output(0)}) ||
        residual->tensor_type().shape() != y ||
        residual_add->output(0)->tensor_type().shape() != y || !b.has_buffer(residual)) {
      residual = nullptr;
    }
  }
  if (residual == nullptr) residual_add = nullptr;
  const Tail tail = trailing_eltwise(residual_add != nullptr ? residual_add->output(0) : sum);

  const memory::desc src = plain_desc(memory::dims{m, k}, type);
  // B as [K, N]: row-major, or Gemm's transposed [N, K] read through swapped strides.
  const memory::desc user_weights =
      trans_b ? memory::desc({k, n}, dnnl_type(w->dtype()), memory::dims{1, k})
              : plain_desc(memory::dims{k, n}, w->dtype());
  const memory::desc any_weights({k, n}, dnnl_type(type), memory::format_tag::any);
  const memory::desc bias_desc = bias != nullptr ? plain_desc(memory::dims{1, n}) : memory::desc();
  const memory::desc dst = plain_desc(memory::dims{m, n}, type);
  dnnl::primitive_attr attr = scratchpad_attr();
  if (!tail.ops.empty() || residual != nullptr) {
    dnnl::post_ops post;
    if (residual != nullptr) post.append_sum(1.0f);
    append(post, tail.ops);
    attr.set_post_ops(post);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any_weights, bias_desc, dst), attr,
                                  b.engine());
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.plain(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_WEIGHTS, -1, pd.weights_desc(),
                  pack(b.engine(), user_weights, w->raw_data(), pd.weights_desc())});
  if (bias != nullptr) {
    args.push_back({DNNL_ARG_BIAS, -1, bias_desc,
                    pack(b.engine(), plain_desc(memory::dims{1, n}, bias->dtype()),
                         bias->raw_data(), bias_desc)});
  }
  // The sum adds into the residual's own buffer when nothing reads it later, else into a copy.
  std::optional<PrimitiveStep::Prefill> prefill;
  int residual_buffer = -1;
  int dst_buffer = -1;
  if (residual != nullptr) {
    residual_buffer = b.plain(residual);
    if (residual_buffer == b.buffer_of(residual) && b.can_overwrite(residual, *residual_add) &&
        !is_graph_output(tail.out)) {
      dst_buffer = residual_buffer;
      residual_buffer = -1;
    } else {
      prefill = PrimitiveStep::Prefill{
          dnnl::reorder(dnnl::reorder::primitive_desc(b.engine(), dst, b.engine(), dst)),
          residual_buffer, dst};
    }
  }
  if (dst_buffer < 0) dst_buffer = b.define(tail.out, plain_desc(y, type));
  args.push_back({DNNL_ARG_DST, dst_buffer, dst, {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  std::string kind(node.op().name());
  if (add != nullptr) kind += "+Add";
  if (residual != nullptr) kind += "+Add";
  const bool in_place = residual != nullptr && !prefill;
  finish(b, node, kind, dnnl::matmul(pd), std::move(args), tail, std::move(prefill),
         residual_buffer);
  if (in_place) b.rebind(tail.out, dst_buffer);
  if (add != nullptr) b.mark_fused(add);
  if (residual_add != nullptr) b.mark_fused(residual_add);
  return true;
}

// Cast between f32 and bf16 as a reorder that keeps the layout (blocked regions stay blocked).
bool lower_cast(ProgramBuilder& b, const Node& node) {
  if (!is_float(node.input(0)) || !is_float(node.output(0))) return false;
  const memory::desc from = b.layout_of(node.input(0));
  const memory::desc to = with_type(from, dtype(node.output(0)));
  dnnl::reorder::primitive_desc pd(b.engine(), from, b.engine(), to);
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(node.input(0)), from, {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), to), to, {}});
  finish(b, node, "Cast", dnnl::reorder(pd), std::move(args), Tail{});
  return true;
}

// Transpose as one reorder: the input, in its own layout (plain or channel-blocked), read with its
// axes permuted into a plain output.
bool lower_transpose(ProgramBuilder& b, const Node& node) {
  if (!is_f32(node.input(0)) || !is_f32(node.output(0))) return false;
  const int rank = node.input(0)->tensor_type().shape().rank();
  if (rank < 1 || rank > DNNL_MAX_NDIMS) return false;
  std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int i = rank; i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return false;
  // Output axis j is input axis perm[j]; permute_axes wants where each input axis goes.
  std::vector<int> to_output(static_cast<size_t>(rank), -1);
  for (int j = 0; j < rank; ++j) {
    const int64_t p = perm[static_cast<size_t>(j)];
    if (p < 0 || p >= rank || to_output[static_cast<size_t>(p)] >= 0) return false;
    to_output[static_cast<size_t>(p)] = j;
  }
  const memory::desc src = b.layout_of(node.input(0)).permute_axes(to_output);
  const memory::desc dst = plain_desc(node.output(0)->tensor_type().shape());
  dnnl::reorder::primitive_desc pd(b.engine(), src, b.engine(), dst);
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(node.input(0)), src, {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), dst), dst, {}});
  finish(b, node, "Transpose", dnnl::reorder(pd), std::move(args), Tail{});
  return true;
}

// A node whose output equals its input (Pad by zeros, as exporters leave before AveragePool): a
// copy in the input's layout, so a blocked region is not cut by reorders to and from plain.
bool lower_copy(ProgramBuilder& b, const Node& node) {
  if (!same_float({node.input(0), node.output(0)}) ||
      node.input(0)->tensor_type().shape() != node.output(0)->tensor_type().shape()) {
    return false;
  }
  if (node.kind() == OpKind::kPad) {
    const Tensor* pads = node.has_input(1) ? node.input(1)->constant_value() : nullptr;
    if (pads == nullptr || pads->dtype() != DType::kI64) return false;
    for (int64_t p : pads->span<int64_t>()) {
      if (p != 0) return false;
    }
  }
  const memory::desc layout = b.layout_of(node.input(0));
  dnnl::reorder::primitive_desc pd(b.engine(), layout, b.engine(), layout);
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(node.input(0)), layout, {}});
  args.push_back({DNNL_ARG_DST, b.define(node.output(0), layout), layout, {}});
  finish(b, node, std::string(node.op().name()), dnnl::reorder(pd), std::move(args), Tail{});
  return true;
}

bool lower(ProgramBuilder& b, const Node& node) {
  if (node.graph() != &b.graph()) return false;
  for (const Value* v : node.outputs()) {
    if (v->tensor_type().shape().numel() == 0) return false;
  }
  switch (node.kind()) {
    case OpKind::kConv:
      if (b.sum_partner(&node) != nullptr) return true;  // lowered at its Add
      return lower_excitation(b, node) || lower_conv(b, node, nullptr);
    case OpKind::kAdd:
      if (const Node* conv = b.sum_partner(&node)) return lower_conv(b, *conv, &node);
      return lower_binary(b, node);
    case OpKind::kMul:
    case OpKind::kSub:
    case OpKind::kDiv:
    case OpKind::kMax:
    case OpKind::kMin: return lower_binary(b, node);
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool: return lower_pool(b, node);
    case OpKind::kConcat:
      return lower_deferred_concat(b, node) || lower_blocked_concat(b, node) ||
             lower_concat(b, node);
    case OpKind::kBatchNormalization:
      return lower_concat_batch_norm(b, node) || lower_batch_norm(b, node);
    case OpKind::kLayerNormalization: return lower_layer_norm(b, node);
    case OpKind::kSoftmax: return lower_softmax(b, node);
    case OpKind::kTranspose: return lower_transpose(b, node);
    case OpKind::kMatMul:
    case OpKind::kGemm:
      return lower_matmul(b, node) || lower_batched_matmul(b, node) ||
             lower_general_matmul(b, node);
    case OpKind::kCast: return lower_cast(b, node);
    case OpKind::kPad: return lower_copy(b, node);
    case OpKind::kLSTM: return lower_lstm(b, node);
    case OpKind::kResize: return lower_resize(b, node);
    case OpKind::kConvTranspose: return lower_conv_transpose(b, node);
    default: return lower_eltwise(b, node);
  }
}

}  // namespace

Result<bool> lower_dnnl(ProgramBuilder& builder, const Node& node) {
  try {
    return lower_quantized(builder, node) || lower(builder, node);
  } catch (const dnnl::error&) {
    return false;  // a combination oneDNN does not implement: the node runs its ref kernel
  }
}

}  // namespace kiln::compiler::cpu
