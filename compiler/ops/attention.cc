// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the attention op family's Attention, FlexAttention and
// LinearAttention (attention_blocks.cc has the others).
#include "compiler/ops/attention.h"

#include <string_view>

#include "compiler/ops/attention_util.h"
#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

using attention::check_arity;
using attention::check_float;
using attention::check_heads;
using attention::dim_at;
using attention::div_dim;
using attention::match_dim;
using attention::mul_dim;

// The Attention inputs after unpacking 3-D inputs into heads: [batch, heads, sequence, size].
struct Unpacked {
  Dim batch, q_heads, q_len, head_size;
  Dim kv_heads, kv_len, v_head_size;
};

Result<Unpacked> unpack_attention(const ops::Attention& op, const InferContext& ctx, int rank) {
  const TensorType& q = ctx.input(0);
  const TensorType& k = ctx.input(1);
  const TensorType& v = ctx.input(2);
  Unpacked u;
  if (rank == 3) {
    if (!op.q_num_heads || !op.kv_num_heads) {
      return ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes");
    }
    KILN_RETURN_IF_ERROR(check_heads(ctx, *op.q_num_heads, *op.kv_num_heads));
    u.q_heads = Dim(*op.q_num_heads);
    u.kv_heads = Dim(*op.kv_num_heads);
    KILN_ASSIGN_OR_RETURN(u.head_size, div_dim(ctx, dim_at(q, 2), *op.q_num_heads, "Q"));
    KILN_ASSIGN_OR_RETURN(Dim k_size, div_dim(ctx, dim_at(k, 2), *op.kv_num_heads, "K"));
    KILN_ASSIGN_OR_RETURN(u.head_size, match_dim(ctx, u.head_size, k_size, "Q and K head sizes"));
    KILN_ASSIGN_OR_RETURN(u.v_head_size, div_dim(ctx, dim_at(v, 2), *op.kv_num_heads, "V"));
    u.q_len = dim_at(q, 1);
    u.kv_len = dim_at(k, 1);
    KILN_ASSIGN_OR_RETURN(u.kv_len, match_dim(ctx, u.kv_len, dim_at(v, 1), "K and V lengths"));
  } else {
    u.q_heads = dim_at(q, 1);
    u.q_len = dim_at(q, 2);
    u.head_size = dim_at(q, 3);
    KILN_ASSIGN_OR_RETURN(u.kv_heads, match_dim(ctx, dim_at(k, 1), dim_at(v, 1), "K and V heads"));
    KILN_ASSIGN_OR_RETURN(u.kv_len, match_dim(ctx, dim_at(k, 2), dim_at(v, 2), "K and V lengths"));
    KILN_ASSIGN_OR_RETURN(u.head_size,
                          match_dim(ctx, u.head_size, dim_at(k, 3), "Q and K head sizes"));
    u.v_head_size = dim_at(v, 3);
    for (const auto& [attr, dim] :
         {std::pair{op.q_num_heads, u.q_heads}, std::pair{op.kv_num_heads, u.kv_heads}}) {
      if (attr && dim.known() && *attr != dim.value) {
        return ctx.errorf("4-D inputs have {} heads where the attributes say {}", dim.value, *attr);
      }
    }
    if (u.q_heads.known() && u.kv_heads.known()) {
      KILN_RETURN_IF_ERROR(check_heads(ctx, u.q_heads.value, u.kv_heads.value));
    }
  }
  Dim batch = dim_at(q, 0);
  KILN_ASSIGN_OR_RETURN(batch, match_dim(ctx, batch, dim_at(k, 0), "Q and K batches"));
  KILN_ASSIGN_OR_RETURN(u.batch, match_dim(ctx, batch, dim_at(v, 0), "Q and V batches"));
  return u;
}

Status check_attention_attributes(const ops::Attention& op, const InferContext& ctx) {
  if (op.is_causal != 0 && op.is_causal != 1) {
    return ctx.errorf("expected is_causal 0 or 1, got {}", op.is_causal);
  }
  if (op.qk_matmul_output_mode < 0 || op.qk_matmul_output_mode > 3) {
    return ctx.errorf("expected qk_matmul_output_mode 0 to 3, got {}", op.qk_matmul_output_mode);
  }
  if (op.left_window_size < -1 || op.right_window_size < -1) {
    return ctx.errorf("expected window sizes -1 (unbounded) or >= 0, got left {} and right {}",
                      op.left_window_size, op.right_window_size);
  }
  if (!(op.softcap >= 0.0f)) return ctx.errorf("expected softcap >= 0, got {}", op.softcap);
  if (op.softmax_precision && !dtype_is_float(*op.softmax_precision)) {
    return ctx.errorf("expected a float softmax_precision, got {}",
                      dtype_name(*op.softmax_precision));
  }
  return Status();
}

}  // namespace

template <>
InferResult infer_op(const ops::Attention& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 7));
  KILN_RETURN_IF_ERROR(check_attention_attributes(op, ctx));
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(check_float(ctx, i));
  const TensorType& q = ctx.input(0);
  const TensorType& v = ctx.input(2);
  if (ctx.input(1).dtype != q.dtype) {
    return ctx.errorf("Q and K must have one element type, got {} and {}", q.to_string(),
                      ctx.input(1).to_string());
  }
  int rank = -1;
  for (int i = 0; i < 3; ++i) {
    const TensorType& t = ctx.input(i);
    if (!t.has_rank()) continue;
    if (t.rank() != 3 && t.rank() != 4) {
      return ctx.errorf("input {} must be 3-D or 4-D, got {}", i, t.to_string());
    }
    if (rank >= 0 && t.rank() != rank) return ctx.error("Q, K and V must have one rank");
    rank = t.rank();
  }
  const int outputs = ctx.num_outputs();
  if (rank < 0) {
    std::vector<ValueType> out = {TensorType::unranked(q.dtype), unknown_dims(q.dtype, 4),
                                  unknown_dims(v.dtype, 4), unknown_dims(q.dtype, 4)};
    out.resize(static_cast<size_t>(std::max(outputs, 1)));
    return out;
  }
  KILN_ASSIGN_OR_RETURN(Unpacked u, unpack_attention(op, ctx, rank));

  const bool past_key = ctx.has_input(4), past_value = ctx.has_input(5);
  if (past_key != past_value) return ctx.error("past_key and past_value go together");
  Dim past_len(0);
  if (past_key) {
    for (int i = 4; i < 6; ++i) {
      KILN_RETURN_IF_ERROR(ctx.require_input(i, 4));
      const TensorType& p = ctx.input(i);
      const TensorType& like = ctx.input(i == 4 ? 0 : 2);
      if (p.dtype != like.dtype) {
        return ctx.errorf("input {} must have the element type {}, got {}", i,
                          dtype_name(like.dtype), p.to_string());
      }
      const Dim size = i == 4 ? u.head_size : u.v_head_size;
      KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(p, 0), u.batch, "the past batch").status());
      KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(p, 1), u.kv_heads, "the past heads").status());
      KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(p, 3), size, "the past head size").status());
    }
    KILN_ASSIGN_OR_RETURN(
        past_len, match_dim(ctx, dim_at(ctx.input(4), 2), dim_at(ctx.input(5), 2), "past lengths"));
  }
  const Dim total =
      past_len.known() && u.kv_len.known() ? Dim(past_len.value + u.kv_len.value) : Dim();
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(3));
    const TensorType& m = ctx.input(3);
    if (m.dtype != DType::kBool && !dtype_is_float(m.dtype)) {
      return ctx.errorf("attn_mask must be bool or a float type, got {}", m.to_string());
    }
    if (m.has_rank() && (m.rank() < 1 || m.rank() > 4)) {
      return ctx.errorf("attn_mask must have rank 1 to 4, got {}", m.to_string());
    }
    if (m.has_rank() && total.known() && dim_at(m, m.rank() - 1).known() &&
        dim_at(m, m.rank() - 1).value > total.value) {
      return ctx.errorf("attn_mask {} is longer than the {} keys", m.to_string(), total.value);
    }
  }
  if (ctx.has_input(6)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(6, 1));
    if (ctx.input(6).dtype != DType::kI64) {
      return ctx.errorf("nonpad_kv_seqlen must be i64, got {}", ctx.input(6).to_string());
    }
    if (past_key) return ctx.error("nonpad_kv_seqlen does not go with past_key and past_value");
    KILN_RETURN_IF_ERROR(
        match_dim(ctx, dim_at(ctx.input(6), 0), u.batch, "nonpad_kv_seqlen's batch").status());
  }

  std::vector<ValueType> out;
  if (rank == 3) {
    out.emplace_back(TensorType(q.dtype, {u.batch, u.q_len, mul_dim(u.q_heads, u.v_head_size)}));
  } else {
    out.emplace_back(TensorType(q.dtype, {u.batch, u.q_heads, u.q_len, u.v_head_size}));
  }
  out.emplace_back(TensorType(q.dtype, {u.batch, u.kv_heads, total, u.head_size}));
  out.emplace_back(TensorType(v.dtype, {u.batch, u.kv_heads, total, u.v_head_size}));
  out.emplace_back(TensorType(q.dtype, {u.batch, u.q_heads, u.q_len, total}));
  if (outputs > 4) return ctx.errorf("expected 1 to 4 outputs, got {}", outputs);
  return out;
}

template <>
InferResult infer_op(const ops::FlexAttention& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 3));
  for (int i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(check_float(ctx, i));
    KILN_RETURN_IF_ERROR(ctx.require_input(i, 4));
  }
  const TensorType& q = ctx.input(0);
  const TensorType& k = ctx.input(1);
  const TensorType& v = ctx.input(2);
  if (k.dtype != q.dtype || v.dtype != q.dtype) {
    return ctx.errorf("Q, K and V must have one element type, got {}, {} and {}", q.to_string(),
                      k.to_string(), v.to_string());
  }
  if (op.softmax_precision && !dtype_is_float(*op.softmax_precision)) {
    return ctx.errorf("expected a float softmax_precision, got {}",
                      dtype_name(*op.softmax_precision));
  }
  for (const auto& [name, graph] :
       {std::pair{"score_mod", op.score_mod.get()}, std::pair{"prob_mod", op.prob_mod.get()}}) {
    if (graph != nullptr && (graph->inputs().size() != 1 || graph->outputs().size() != 1)) {
      return ctx.errorf("{} must have 1 input and 1 output, got {} and {}", name,
                        graph->inputs().size(), graph->outputs().size());
    }
  }
  KILN_ASSIGN_OR_RETURN(Dim batch, match_dim(ctx, dim_at(q, 0), dim_at(k, 0), "Q and K batches"));
  KILN_RETURN_IF_ERROR(match_dim(ctx, batch, dim_at(v, 0), "Q and V batches").status());
  KILN_ASSIGN_OR_RETURN(Dim kv_heads, match_dim(ctx, dim_at(k, 1), dim_at(v, 1), "K and V heads"));
  KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(k, 2), dim_at(v, 2), "K and V lengths").status());
  KILN_RETURN_IF_ERROR(match_dim(ctx, dim_at(q, 3), dim_at(k, 3), "Q and K head sizes").status());
  if (dim_at(q, 1).known() && kv_heads.known()) {
    KILN_RETURN_IF_ERROR(attention::check_heads(ctx, dim_at(q, 1).value, kv_heads.value));
  }
  return std::vector<ValueType>{
      TensorType(v.dtype, {batch, dim_at(q, 1), dim_at(q, 2), dim_at(v, 3)})};
}

template <>
InferResult infer_op(const ops::LinearAttention& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 6));
  if (!op.q_num_heads || !op.kv_num_heads) {
    return ctx.error("the q_num_heads and kv_num_heads attributes are required");
  }
  const int64_t hq = *op.q_num_heads, hkv = *op.kv_num_heads;
  KILN_RETURN_IF_ERROR(check_heads(ctx, hq, hkv));
  const std::string& rule = op.update_rule;
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") {
    return ctx.errorf("expected update_rule linear, gated, delta or gated_delta, got \"{}\"", rule);
  }
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gated != ctx.has_input(4)) {
    return ctx.errorf("update_rule {} {} the decay input", rule, gated ? "needs" : "takes no");
  }
  if (delta != ctx.has_input(5)) {
    return ctx.errorf("update_rule {} {} the beta input", rule, delta ? "needs" : "takes no");
  }
  for (int i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(check_float(ctx, i));
    KILN_RETURN_IF_ERROR(ctx.require_input(i, 3));
  }
  const TensorType& q = ctx.input(0);
  for (int i = 1; i < 6; ++i) {
    if (i == 3 || !ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(ctx.require_input(i, 3));
    if (ctx.input(i).dtype != q.dtype) {
      return ctx.errorf("input {} must have the query's element type {}, got {}", i,
                        dtype_name(q.dtype), ctx.input(i).to_string());
    }
  }
  KILN_ASSIGN_OR_RETURN(Dim dk, div_dim(ctx, dim_at(q, 2), hq, "query"));
  KILN_ASSIGN_OR_RETURN(Dim k_size, div_dim(ctx, dim_at(ctx.input(1), 2), hkv, "key"));
  KILN_ASSIGN_OR_RETURN(dk, match_dim(ctx, dk, k_size, "query and key head sizes"));
  KILN_ASSIGN_OR_RETURN(Dim dv, div_dim(ctx, dim_at(ctx.input(2), 2), hkv, "value"));
  Dim batch = dim_at(q, 0), len = dim_at(q, 1);
  for (int i = 1; i < 6; ++i) {
    if (i == 3 || !ctx.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(batch, match_dim(ctx, batch, dim_at(ctx.input(i), 0), "batches"));
    KILN_ASSIGN_OR_RETURN(len, match_dim(ctx, len, dim_at(ctx.input(i), 1), "lengths"));
  }
  if (ctx.has_input(4)) {
    const Dim last = dim_at(ctx.input(4), 2);
    if (last.known() && last.value != hkv && !(dk.known() && last.value == hkv * dk.value)) {
      return ctx.errorf("decay {} must end in kv_num_heads or kv_num_heads * d_k values",
                        ctx.input(4).to_string());
    }
  }
  if (ctx.has_input(5)) {
    const Dim last = dim_at(ctx.input(5), 2);
    if (last.known() && last.value != hkv && last.value != 1) {
      return ctx.errorf("beta {} must end in kv_num_heads or 1 values", ctx.input(5).to_string());
    }
  }
  DType state_type = q.dtype;
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(check_float(ctx, 3));
    KILN_RETURN_IF_ERROR(ctx.require_input(3, 4));
    const TensorType& s = ctx.input(3);
    state_type = s.dtype;
    const Dim expected[] = {batch, Dim(hkv), dk, dv};
    for (int d = 0; d < 4; ++d) {
      KILN_RETURN_IF_ERROR(
          match_dim(ctx, dim_at(s, d), expected[d], "past_state and (B, H_kv, d_k, d_v)").status());
    }
  }
  return std::vector<ValueType>{TensorType(q.dtype, {batch, len, mul_dim(Dim(hq), dv)}),
                                TensorType(state_type, {batch, Dim(hkv), dk, dv})};
}

}  // namespace kiln::compiler
