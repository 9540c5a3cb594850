// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the misc op family.
#include "compiler/ops/misc.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

// Checks the shared inputs of the two losses (scores [N, C, d...], target [N, d...], optional
// weight [C]) and returns the loss type.
Result<TensorType> infer_loss(const InferContext& ctx, const std::string& reduction) {
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.errorf("reduction must be none, sum or mean, got \"{}\"", reduction);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& x = ctx.input(0);
  const TensorType& target = ctx.input(1);
  if (!dtype_is_float(x.dtype)) return ctx.errorf("expected float scores, got {}", x.to_string());
  if (target.dtype != DType::kI32 && target.dtype != DType::kI64) {
    return ctx.errorf("expected an i32 or i64 target, got {}", target.to_string());
  }
  if (x.has_rank() && x.rank() < 2)
    return ctx.errorf("expected scores [N, C, ...], got {}", x.to_string());
  if (x.has_rank() && target.has_rank()) {
    if (target.rank() != x.rank() - 1) {
      return ctx.errorf("expected a target of rank {} for scores {}, got {}", x.rank() - 1,
                        x.to_string(), target.to_string());
    }
    for (int i = 0; i < target.rank(); ++i) {
      const Dim& t = (*target.dims)[static_cast<size_t>(i)];
      const Dim& s = (*x.dims)[static_cast<size_t>(i == 0 ? 0 : i + 1)];
      if (t.known() && s.known() && t.value != s.value) {
        return ctx.errorf("target {} does not match scores {}", target.to_string(), x.to_string());
      }
    }
  }
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2, 1));
    const TensorType& w = ctx.input(2);
    if (w.dtype != x.dtype) {
      return ctx.errorf("weight must have the scores' dtype {}, got {}", dtype_name(x.dtype),
                        w.to_string());
    }
    if (w.is_static() && x.has_rank() && (*x.dims)[1].known() &&
        w.shape()[0] != (*x.dims)[1].value) {
      return ctx.errorf("weight {} does not match the {} classes of {}", w.to_string(),
                        (*x.dims)[1].value, x.to_string());
    }
  }
  if (reduction != "none") return TensorType(x.dtype, std::vector<Dim>{});
  if (target.has_rank()) return TensorType(x.dtype, *target.dims);
  return TensorType::unranked(x.dtype);
}

// Checks the optimizers' R (float scalar) and T (i64 scalar) and `groups` equal-sized groups of
// tensors after them, each shaped like the first group (X); returns the X types.
Result<std::vector<TensorType>> infer_optimizer(const InferContext& ctx, int groups) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  const TensorType& r = ctx.input(0);
  const TensorType& t = ctx.input(1);
  if (!dtype_is_float(r.dtype) || (r.is_static() && r.shape().numel() != 1)) {
    return ctx.errorf("R must be a float scalar, got {}", r.to_string());
  }
  if (t.dtype != DType::kI64 || (t.is_static() && t.shape().numel() != 1)) {
    return ctx.errorf("T must be an i64 scalar, got {}", t.to_string());
  }
  const int rest = ctx.num_inputs() - 2;
  if (rest <= 0 || rest % groups != 0) {
    return ctx.errorf("expected R, T and {} groups of equally many tensors, got {} inputs", groups,
                      ctx.num_inputs());
  }
  const int n = rest / groups;
  if (ctx.num_outputs() > (groups - 1) * n) {
    return ctx.errorf("expected at most {} outputs for {} optimized tensors, got {}",
                      (groups - 1) * n, n, ctx.num_outputs());
  }
  std::vector<TensorType> xs;
  for (int i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_input(2 + i));
    const TensorType& x = ctx.input(2 + i);
    if (!dtype_is_float(x.dtype))
      return ctx.errorf("expected float tensors, got {}", x.to_string());
    for (int g = 1; g < groups; ++g) {
      KILN_RETURN_IF_ERROR(ctx.require_input(2 + g * n + i));
      const TensorType& other = ctx.input(2 + g * n + i);
      if (other.dtype != x.dtype ||
          (x.is_static() && other.is_static() && !(x.shape() == other.shape()))) {
        return ctx.errorf("input {} must match input {} ({}), got {}", 2 + g * n + i, 2 + i,
                          x.to_string(), other.to_string());
      }
    }
    xs.push_back(x);
  }
  return xs;
}

// The outputs of an optimizer: `copies` groups of the X types (X_new..., then V_new..., ...).
std::vector<ValueType> optimizer_outputs(const std::vector<TensorType>& xs, int copies) {
  std::vector<ValueType> out;
  for (int c = 0; c < copies; ++c) {
    for (const TensorType& x : xs) out.emplace_back(x);
  }
  return out;
}

}  // namespace

template <>
InferResult infer_op(const ops::NegativeLogLikelihoodLoss& op, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TensorType loss, infer_loss(ctx, op.reduction));
  return std::vector<ValueType>{loss};
}

template <>
InferResult infer_op(const ops::SoftmaxCrossEntropyLoss& op, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TensorType loss, infer_loss(ctx, op.reduction));
  return std::vector<ValueType>{loss, ctx.input(0)};
}

template <>
InferResult infer_op(const ops::StringNormalizer& op, const InferContext& ctx) {
  const std::string& action = op.case_change_action;
  if (action != "LOWER" && action != "UPPER" && action != "NONE") {
    return ctx.errorf("case_change_action must be LOWER, UPPER or NONE, got \"{}\"", action);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (x.dtype != DType::kString)
    return ctx.errorf("expected a string input, got {}", x.to_string());
  if (!x.has_rank()) return std::vector<ValueType>{x};
  const bool two_d = x.rank() == 2;
  if (x.rank() != 1 && !(two_d && (!(*x.dims)[0].known() || (*x.dims)[0].value == 1))) {
    return ctx.errorf("expected input [C] or [1, C], got {}", x.to_string());
  }
  if (op.stopwords.empty()) return std::vector<ValueType>{x};
  std::vector<Dim> dims = two_d ? std::vector<Dim>{Dim(1), Dim()} : std::vector<Dim>{Dim()};
  return std::vector<ValueType>{TensorType(DType::kString, std::move(dims))};
}

template <>
InferResult infer_op(const ops::TfIdfVectorizer& op, const InferContext& ctx) {
  if (!op.mode || (*op.mode != "TF" && *op.mode != "IDF" && *op.mode != "TFIDF")) {
    return ctx.errorf("mode must be TF, IDF or TFIDF, got \"{}\"", op.mode.value_or(""));
  }
  if (!op.min_gram_length || !op.max_gram_length || !op.max_skip_count || !op.ngram_counts ||
      !op.ngram_indexes) {
    return ctx.error(
        "expected the attributes min_gram_length, max_gram_length, max_skip_count, ngram_counts "
        "and ngram_indexes");
  }
  if (*op.min_gram_length < 1 || *op.max_gram_length < *op.min_gram_length) {
    return ctx.errorf("expected 1 <= min_gram_length <= max_gram_length, got {} and {}",
                      *op.min_gram_length, *op.max_gram_length);
  }
  if (*op.max_skip_count < 0)
    return ctx.errorf("max_skip_count must be >= 0, got {}", *op.max_skip_count);
  const bool strings = !op.pool_strings.empty();
  if (strings == op.pool_int64s.has_value()) {
    return ctx.error("expected exactly one of pool_strings and pool_int64s");
  }
  const auto pool_size =
      static_cast<int64_t>(strings ? op.pool_strings.size() : op.pool_int64s->size());
  const std::vector<int64_t>& counts = *op.ngram_counts;
  int64_t ngrams = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t begin = counts[k];
    const int64_t end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
    const auto n = static_cast<int64_t>(k + 1);
    if (begin < 0 || end < begin || end > pool_size || (end - begin) % n != 0) {
      return ctx.errorf("ngram_counts {} do not split a pool of {} into {}-grams",
                        fmt::join(counts, ","), pool_size, n);
    }
    ngrams += (end - begin) / n;
  }
  const std::vector<int64_t>& indexes = *op.ngram_indexes;
  if (static_cast<int64_t>(indexes.size()) != ngrams) {
    return ctx.errorf("expected {} ngram_indexes (one per pool n-gram), got {}", ngrams,
                      indexes.size());
  }
  if (op.weights && op.weights->size() != indexes.size()) {
    return ctx.errorf("expected {} weights, got {}", indexes.size(), op.weights->size());
  }
  int64_t width = 0;
  for (int64_t i : indexes) {
    if (i < 0) return ctx.errorf("ngram_indexes must be >= 0, got {}", i);
    width = std::max(width, i + 1);
  }
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (strings ? x.dtype != DType::kString : (x.dtype != DType::kI32 && x.dtype != DType::kI64)) {
    return ctx.errorf("expected a {} input for this pool, got {}",
                      strings ? "string" : "i32 or i64", x.to_string());
  }
  if (!x.has_rank()) return std::vector<ValueType>{TensorType::unranked(DType::kF32)};
  if (x.rank() == 1) return std::vector<ValueType>{TensorType(DType::kF32, {Dim(width)})};
  if (x.rank() == 2)
    return std::vector<ValueType>{TensorType(DType::kF32, {(*x.dims)[0], Dim(width)})};
  return ctx.errorf("expected an input of rank 1 or 2, got {}", x.to_string());
}

template <>
InferResult infer_op(const ops::Adagrad&, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> xs, infer_optimizer(ctx, 3));
  return optimizer_outputs(xs, 2);
}

template <>
InferResult infer_op(const ops::Adam&, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> xs, infer_optimizer(ctx, 4));
  return optimizer_outputs(xs, 3);
}

template <>
InferResult infer_op(const ops::Momentum& op, const InferContext& ctx) {
  if (!op.alpha || !op.beta || !op.mode || !op.norm_coefficient) {
    return ctx.error("expected the attributes alpha, beta, mode and norm_coefficient");
  }
  if (*op.mode != "standard" && *op.mode != "nesterov") {
    return ctx.errorf("mode must be standard or nesterov, got \"{}\"", *op.mode);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> xs, infer_optimizer(ctx, 3));
  return optimizer_outputs(xs, 2);
}

}  // namespace kiln::compiler
