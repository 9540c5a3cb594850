// SPDX-License-Identifier: Apache-2.0
// ref kernels for the attention family's Attention and FlexAttention, in double precision with
// values rounded to the element type where the ONNX function bodies hold them in it.
#include "compiler/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/attention_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Attention's sizes, with 3-D inputs seen as 4-D [batch, heads, length, head size].
struct Sizes {
  int64_t batch = 0, q_heads = 0, q_len = 0, head = 0;
  int64_t kv_heads = 0, kv_len = 0, v_head = 0;
  int64_t past = 0, total = 0;
};

Sizes sizes_of(const ops::Attention& op, const KernelContext& ctx) {
  const Shape& q = ctx.input(0).shape();
  const Shape& k = ctx.input(1).shape();
  const Shape& v = ctx.input(2).shape();
  Sizes s;
  s.batch = q[0];
  if (q.rank() == 3) {
    s.q_heads = *op.q_num_heads;
    s.kv_heads = *op.kv_num_heads;
    s.q_len = q[1];
    s.head = q[2] / s.q_heads;
    s.kv_len = k[1];
    s.v_head = v[2] / s.kv_heads;
  } else {
    s.q_heads = q[1];
    s.q_len = q[2];
    s.head = q[3];
    s.kv_heads = k[1];
    s.kv_len = k[2];
    s.v_head = v[3];
  }
  s.past = ctx.has_input(4) ? ctx.input(4).shape()[2] : 0;
  s.total = s.past + s.kv_len;
  return s;
}

// Input i as [batch, heads, length, size] values (3-D inputs split into heads).
std::vector<double> as_heads(const KernelContext& ctx, int i, int64_t heads) {
  const Tensor& t = ctx.input(i);
  std::vector<double> values = tensor_to_doubles(t);
  if (t.rank() == 4) return values;
  const Shape& s = t.shape();
  return split_heads(values, s[0], s[1], heads, s[2] / heads);
}

// [batch, heads, past, size] and [batch, heads, len, size] joined along the length.
std::vector<double> join_past(const std::vector<double>& past, const std::vector<double>& now,
                              int64_t batch_heads, int64_t past_len, int64_t len, int64_t size) {
  std::vector<double> out;
  out.reserve(past.size() + now.size());
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    const auto p = static_cast<std::ptrdiff_t>(bh * past_len * size);
    const auto n = static_cast<std::ptrdiff_t>(bh * len * size);
    out.insert(out.end(), past.begin() + p, past.begin() + p + past_len * size);
    out.insert(out.end(), now.begin() + n, now.begin() + n + len * size);
  }
  return out;
}

// The attention mask broadcast to [batch, q_heads, q_len, total]; keys past its last dim are
// masked.
class Mask {
 public:
  Mask(const Tensor& mask, const Sizes& s)
      : is_bool_(mask.dtype() == DType::kBool), values_(tensor_to_doubles(mask)) {
    const Shape& shape = mask.shape();
    const int64_t target[4] = {s.batch, s.q_heads, s.q_len, s.total};
    int64_t stride = 1;
    for (int a = 3; a >= 0; --a) {
      const int m = a - (4 - shape.rank());
      const int64_t dim = m >= 0 ? shape[m] : 1;
      if (a == 3) {
        length_ = dim;
      } else if (dim != 1 && dim != target[a]) {
        mismatch_ = true;
      }
      strides_[a] = dim == 1 && a != 3 ? 0 : stride;
      stride *= dim;
    }
  }

  // Whether the mask broadcasts to [batch, q_heads, q_len, total].
  bool fits(const Sizes& s) const { return !mismatch_ && length_ <= s.total; }

  // The additive bias at (b, h, i, j): 0 or -inf for a bool mask, the value for a float one.
  double at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (j >= length_) return kNegInf;
    const double v =
        values_[static_cast<size_t>(b * strides_[0] + h * strides_[1] + i * strides_[2] + j)];
    if (is_bool_) return v != 0 ? 0.0 : kNegInf;
    return v;
  }

 private:
  bool is_bool_;
  std::vector<double> values_;
  int64_t strides_[4] = {};
  int64_t length_ = 0;
  bool mismatch_ = false;
};

// softmax(x) along a row; a row whose bias masks every key is all zeros.
void softmax_row(std::vector<double>& x, bool fully_masked, DType dtype) {
  if (fully_masked) {
    std::fill(x.begin(), x.end(), 0.0);
    return;
  }
  double max = kNegInf;
  for (double v : x) max = std::max(max, v);
  // The denominator as the ONNX reference implementation sums it: bf16 partial sums each
  // rounded to bf16, other types' sums rounded once.
  double sum = 0;
  for (double& v : x) {
    v = round_to(dtype, std::exp(round_to(dtype, v - max)));
    sum = dtype == DType::kBF16 ? round_to(dtype, sum + v) : sum + v;
  }
  sum = round_to(dtype, sum);
  for (double& v : x) v = round_to(dtype, v / sum);
}

// The additive bias of query row (b, h, i) over every key into `bias`: -inf where the causal
// frontier, the window or the external cache's fill hides the key, else the mask's value (0 without
// one). Returns whether the row hides every key.
bool row_bias(const ops::Attention& op, const Sizes& s, const std::optional<Mask>& mask,
              const std::vector<int64_t>& nonpad, int64_t offset, int64_t b, int64_t h, int64_t i,
              std::vector<double>& bias) {
  bool fully_masked = true;
  for (int64_t j = 0; j < s.total; ++j) {
    // How far key j lies behind query i's absolute position.
    const int64_t behind = i + offset - j;
    bool allowed = !op.is_causal || behind >= 0;
    if (op.left_window_size >= 0 && behind > op.left_window_size) allowed = false;
    if (op.right_window_size >= 0 && -behind > op.right_window_size) allowed = false;
    if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) allowed = false;
    double value = kNegInf;
    if (allowed) value = mask ? mask->at(b, h, i, j) : 0.0;
    bias[static_cast<size_t>(j)] = value;
    fully_masked = fully_masked && value == kNegInf;
  }
  return fully_masked;
}

}  // namespace

// Every step holds its result in the element type as the ONNX reference computes it (sqrt(scale),
// the scaled Q and K, each score, the softcap, the biased score, the softmax's steps), so that f16
// and bf16 results match it; sums and dot products accumulate in double before that rounding.
template <>
Status run_op(const ops::Attention& op, KernelContext& ctx) {
  const Sizes s = sizes_of(op, ctx);
  const DType dtype = ctx.input(0).dtype();
  const DType softmax_dtype = op.softmax_precision.value_or(dtype);
  const int64_t groups = s.q_heads / s.kv_heads;

  const std::vector<double> q = as_heads(ctx, 0, s.q_heads);
  std::vector<double> k = as_heads(ctx, 1, s.kv_heads);
  std::vector<double> v = as_heads(ctx, 2, s.kv_heads);
  if (ctx.has_input(4)) {
    const int64_t bh = s.batch * s.kv_heads;
    k = join_past(tensor_to_doubles(ctx.input(4)), k, bh, s.past, s.kv_len, s.head);
    v = join_past(tensor_to_doubles(ctx.input(5)), v, bh, s.past, s.kv_len, s.v_head);
  }
  std::optional<Mask> mask;
  if (ctx.has_input(3)) {
    mask.emplace(ctx.input(3), s);
    if (!mask->fits(s)) {
      return ctx.errorf("attn_mask {} does not broadcast to [{}, {}, {}, {}]",
                        ctx.input(3).shape().to_string(), s.batch, s.q_heads, s.q_len, s.total);
    }
  }
  std::vector<int64_t> nonpad;
  if (ctx.has_input(6)) {
    nonpad = tensor_to_ints(ctx.input(6));
    for (int64_t n : nonpad) {
      if (n < 0 || n > s.total) {
        return ctx.errorf("nonpad_kv_seqlen {} is outside [0, {}]", n, s.total);
      }
    }
  }

  // Q and K are each scaled by sqrt(scale) before their product.
  const double scale =
      op.scale ? static_cast<double>(*op.scale) : 1.0 / std::sqrt(static_cast<double>(s.head));
  const double root = round_to(dtype, std::sqrt(scale));
  std::vector<double> qs(q.size()), ks(k.size());
  for (size_t i = 0; i < q.size(); ++i) qs[i] = round_to(dtype, q[i] * root);
  for (size_t i = 0; i < k.size(); ++i) ks[i] = round_to(dtype, k[i] * root);

  const bool want_qk = ctx.num_outputs() > 3 && ctx.output_used(3);
  std::vector<double> y(static_cast<size_t>(s.batch * s.q_heads * s.q_len * s.v_head));
  std::vector<double> qk(want_qk ? static_cast<size_t>(s.batch * s.q_heads * s.q_len * s.total)
                                 : 0);
  std::vector<double> row(static_cast<size_t>(s.total)), bias(row.size());
  for (int64_t b = 0; b < s.batch; ++b) {
    // Valid keys before this query block: the past, or the external cache's fill.
    const int64_t offset = ctx.has_input(4)  ? s.past
                           : !nonpad.empty() ? nonpad[static_cast<size_t>(b)] - s.q_len
                                             : 0;
    for (int64_t h = 0; h < s.q_heads; ++h) {
      const int64_t kvh = b * s.kv_heads + h / groups;
      for (int64_t i = 0; i < s.q_len; ++i) {
        const bool fully_masked = row_bias(op, s, mask, nonpad, offset, b, h, i, bias);
        const double* qrow = &qs[static_cast<size_t>(((b * s.q_heads + h) * s.q_len + i) * s.head)];
        for (int64_t j = 0; j < s.total; ++j) {
          const double* krow = &ks[static_cast<size_t>((kvh * s.total + j) * s.head)];
          double dot = 0;
          for (int64_t d = 0; d < s.head; ++d) dot += qrow[d] * krow[d];
          row[static_cast<size_t>(j)] = round_to(dtype, dot);
        }
        const size_t qk_row = static_cast<size_t>(((b * s.q_heads + h) * s.q_len + i) * s.total);
        if (want_qk && op.qk_matmul_output_mode == 0) {
          std::copy(row.begin(), row.end(), qk.begin() + static_cast<std::ptrdiff_t>(qk_row));
        }
        if (op.softcap > 0) {
          const double cap = op.softcap;
          for (double& x : row) x = round_to(dtype, cap * std::tanh(x / cap));
        }
        if (want_qk && op.qk_matmul_output_mode == 1) {
          std::copy(row.begin(), row.end(), qk.begin() + static_cast<std::ptrdiff_t>(qk_row));
        }
        for (size_t j = 0; j < row.size(); ++j) row[j] = round_to(dtype, row[j] + bias[j]);
        if (want_qk && op.qk_matmul_output_mode == 2) {
          std::copy(row.begin(), row.end(), qk.begin() + static_cast<std::ptrdiff_t>(qk_row));
        }
        round_all(softmax_dtype, row);
        softmax_row(row, fully_masked, softmax_dtype);
        if (want_qk && op.qk_matmul_output_mode == 3) {
          std::copy(row.begin(), row.end(), qk.begin() + static_cast<std::ptrdiff_t>(qk_row));
        }
        for (int64_t e = 0; e < s.v_head; ++e) {
          double sum = 0;
          for (int64_t j = 0; j < s.total; ++j) {
            sum += row[static_cast<size_t>(j)] *
                   v[static_cast<size_t>((kvh * s.total + j) * s.v_head + e)];
          }
          y[static_cast<size_t>(((b * s.q_heads + h) * s.q_len + i) * s.v_head + e)] = sum;
        }
      }
    }
  }
  if (ctx.input(0).rank() == 3) y = merge_heads(y, s.batch, s.q_len, s.q_heads, s.v_head);
  store_doubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.output_used(1)) store_doubles(k, ctx.output(1));
  if (ctx.num_outputs() > 2 && ctx.output_used(2)) store_doubles(v, ctx.output(2));
  if (want_qk) store_doubles(qk, ctx.output(3));
  return Status();
}

namespace {

// Runs a FlexAttention modifier graph on `values` ([batch, heads, q_len, kv_len] in `dtype`) and
// returns its output's values.
Result<std::vector<double>> run_modifier(KernelContext& ctx, const Graph& graph,
                                         std::string_view name, const std::vector<double>& values,
                                         DType dtype, const Shape& shape) {
  Tensor in(dtype, shape);
  store_doubles(values, in);
  Result<std::vector<Argument>> outs = ctx.run_subgraph(graph, {Argument(std::move(in))});
  if (!outs.ok())
    return outs.status().with_context(fmt::format("{}: {}", ctx.node().describe(), name));
  if (outs->size() != 1 || !(*outs)[0].is_tensor()) {
    return ctx.errorf("{} must give one tensor", name);
  }
  const Tensor& out = (*outs)[0].tensor();
  if (out.dtype() != dtype || !(out.shape() == shape)) {
    return ctx.errorf("{} must give {}{}, got {}{}", name, dtype_name(dtype), shape.to_string(),
                      dtype_name(out.dtype()), out.shape().to_string());
  }
  return tensor_to_doubles(out);
}

}  // namespace

template <>
Status run_op(const ops::FlexAttention& op, KernelContext& ctx) {
  const Tensor& qt = ctx.input(0);
  const Shape& qs_shape = qt.shape();
  const Shape& ks_shape = ctx.input(1).shape();
  const int64_t batch = qs_shape[0], q_heads = qs_shape[1], q_len = qs_shape[2], head = qs_shape[3];
  const int64_t kv_heads = ks_shape[1], kv_len = ks_shape[2];
  const int64_t v_head = ctx.input(2).shape()[3];
  const int64_t groups = q_heads / kv_heads;
  const DType dtype = qt.dtype();
  const DType compute =
      op.softmax_precision.value_or(dtype == DType::kF64 ? DType::kF64 : DType::kF32);

  // Q and K are each scaled by sqrt(scale), that root held in the element type.
  const double scale =
      op.scale ? static_cast<double>(*op.scale) : 1.0 / std::sqrt(static_cast<double>(head));
  const double root = round_to(dtype, std::sqrt(static_cast<double>(static_cast<float>(scale))));
  std::vector<double> q = tensor_to_doubles(qt);
  std::vector<double> k = tensor_to_doubles(ctx.input(1));
  std::vector<double> v = tensor_to_doubles(ctx.input(2));
  for (double& x : q) x = round_to(dtype, x * root);
  for (double& x : k) x = round_to(dtype, x * root);
  round_all(compute, v);

  const Shape scores_shape{batch, q_heads, q_len, kv_len};
  std::vector<double> scores(static_cast<size_t>(scores_shape.numel()));
  for (int64_t bh = 0; bh < batch * q_heads; ++bh) {
    const int64_t kvh = (bh / q_heads) * kv_heads + (bh % q_heads) / groups;
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t j = 0; j < kv_len; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < head; ++d) {
          dot += q[static_cast<size_t>((bh * q_len + i) * head + d)] *
                 k[static_cast<size_t>((kvh * kv_len + j) * head + d)];
        }
        scores[static_cast<size_t>((bh * q_len + i) * kv_len + j)] =
            round_to(compute, round_to(dtype, dot));
      }
    }
  }
  if (op.score_mod) {
    KILN_ASSIGN_OR_RETURN(
        scores, run_modifier(ctx, *op.score_mod, "score_mod", scores, compute, scores_shape));
  }
  std::vector<double> row(static_cast<size_t>(kv_len));
  for (int64_t r = 0; r < batch * q_heads * q_len; ++r) {
    const auto at = scores.begin() + static_cast<std::ptrdiff_t>(r * kv_len);
    std::copy(at, at + kv_len, row.begin());
    softmax_row(row, /*fully_masked=*/false, compute);
    std::copy(row.begin(), row.end(), at);
  }
  if (op.prob_mod) {
    KILN_ASSIGN_OR_RETURN(
        scores, run_modifier(ctx, *op.prob_mod, "prob_mod", scores, compute, scores_shape));
  }
  std::vector<double> y(static_cast<size_t>(batch * q_heads * q_len * v_head));
  for (int64_t bh = 0; bh < batch * q_heads; ++bh) {
    const int64_t kvh = (bh / q_heads) * kv_heads + (bh % q_heads) / groups;
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t e = 0; e < v_head; ++e) {
        double sum = 0;
        for (int64_t j = 0; j < kv_len; ++j) {
          sum += scores[static_cast<size_t>((bh * q_len + i) * kv_len + j)] *
                 v[static_cast<size_t>((kvh * kv_len + j) * v_head + e)];
        }
        y[static_cast<size_t>((bh * q_len + i) * v_head + e)] = round_to(compute, sum);
      }
    }
  }
  store_doubles(y, ctx.output(0));
  return Status();
}

}  // namespace kiln::compiler::ref
