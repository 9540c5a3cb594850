// SPDX-License-Identifier: Apache-2.0
// ref kernels for the misc op family: plain loops, the executable specification.
#include "compiler/ops/misc.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// The loss -weight[t] * logp[n, t, d] for every target t = target[n, d], reduced. `logp` holds
// the scores [N, C, D] (D the product of the trailing dims); ignored targets weigh 0, and "mean"
// divides by the total weight.
Status run_loss(KernelContext& ctx, const std::vector<double>& logp, const Shape& scores,
                const std::optional<int64_t>& ignore_index, const std::string& reduction) {
  const int64_t n = scores[0];
  const int64_t classes = scores[1];
  const int64_t d = scores.numel(2, scores.rank());
  const std::vector<int64_t> target = tensor_to_ints(ctx.input(1));
  std::vector<double> weight;
  if (ctx.has_input(2)) weight = tensor_to_doubles(ctx.input(2));
  std::vector<double> loss(static_cast<size_t>(n * d), 0.0);
  double total_weight = 0;
  double total_loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = target[static_cast<size_t>(i * d + j)];
      if (ignore_index && t == *ignore_index) continue;
      if (t < 0 || t >= classes) {
        return ctx.errorf("target value {} is outside the {} classes [0, {})", t, classes, classes);
      }
      const double w = weight.empty() ? 1.0 : weight[static_cast<size_t>(t)];
      const double l = -w * logp[static_cast<size_t>((i * classes + t) * d + j)];
      loss[static_cast<size_t>(i * d + j)] = l;
      total_weight += w;
      total_loss += l;
    }
  }
  if (reduction == "none") {
    store_doubles(loss, ctx.output(0));
  } else {
    double v = reduction == "sum" ? total_loss : total_loss / total_weight;
    store_doubles(std::span<const double>(&v, 1), ctx.output(0));
  }
  return Status();
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

// Counts the pool's n-grams in each row of `x` ([C] or [N, C]) and writes the weighted counts.
template <class K>
Status run_tfidf(const ops::TfIdfVectorizer& op, KernelContext& ctx, const std::vector<K>& x,
                 const std::vector<K>& pool) {
  // Pool n-gram -> its index in ngram_indexes (pool order).
  std::map<std::vector<K>, int64_t> lookup;
  const std::vector<int64_t>& counts = *op.ngram_counts;
  int64_t ngram = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const auto begin = static_cast<size_t>(counts[k]);
    const size_t end = k + 1 < counts.size() ? static_cast<size_t>(counts[k + 1]) : pool.size();
    for (size_t p = begin; p + k < end; p += k + 1) {
      lookup.emplace(std::vector<K>(pool.begin() + static_cast<std::ptrdiff_t>(p),
                                    pool.begin() + static_cast<std::ptrdiff_t>(p + k + 1)),
                     ngram++);
    }
  }

  const Tensor& in = ctx.input(0);
  const int64_t rows = in.rank() == 2 ? in.shape()[0] : 1;
  const int64_t cols = in.rank() == 2 ? in.shape()[1] : in.numel();
  Tensor& out = ctx.output(0);
  const int64_t width = out.shape()[out.rank() - 1];
  float* y = out.data<float>();
  std::vector<int64_t> found(static_cast<size_t>(ngram));
  std::vector<K> key;
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(found.begin(), found.end(), 0);
    const K* row = x.data() + r * cols;
    // Longer n-grams than the pool's levels or the row cannot match.
    const int64_t max_n =
        std::min({*op.max_gram_length, static_cast<int64_t>(counts.size()), cols});
    for (int64_t start = 0; start < cols; ++start) {
      for (int64_t n = *op.min_gram_length; n <= max_n; ++n) {
        // A 1-gram is the same for every skip; count it once.
        const int64_t max_skip = n == 1 ? 0 : *op.max_skip_count;
        for (int64_t skip = 0; skip <= max_skip; ++skip) {
          if (start + (n - 1) * (skip + 1) >= cols) break;
          key.clear();
          for (int64_t m = 0; m < n; ++m) key.push_back(row[start + m * (skip + 1)]);
          auto it = lookup.find(key);
          if (it != lookup.end()) ++found[static_cast<size_t>(it->second)];
        }
      }
    }
    for (int64_t i = 0; i < ngram; ++i) {
      const auto c = static_cast<double>(found[static_cast<size_t>(i)]);
      const double w = op.weights ? (*op.weights)[static_cast<size_t>(i)] : 1.0;
      double v = c;
      if (*op.mode == "IDF") v = c > 0 ? w : 0.0;
      if (*op.mode == "TFIDF") v = c * w;
      y[r * width + (*op.ngram_indexes)[static_cast<size_t>(i)]] += static_cast<float>(v);
    }
  }
  return Status();
}

// An optimizer's scalars R and T and its count n of optimized tensors; input 2 + g * n + i is
// tensor i of group g (X, G, then the state tensors).
struct OptimizerInputs {
  double r = 0;
  int64_t t = 0;
  int n = 0;  // optimized tensors
};

OptimizerInputs optimizer_inputs(KernelContext& ctx, int groups) {
  OptimizerInputs in;
  in.r = tensor_to_doubles(ctx.input(0)).front();
  in.t = tensor_to_ints(ctx.input(1)).front();
  in.n = (ctx.num_inputs() - 2) / groups;
  return in;
}

// For each optimized tensor and element, calls update(in, {x, g, state...}) and takes back
// {new_x, new_state...}; output g * n + i is group g of tensor i (written when the node has it).
template <size_t kGroups, class F>
void run_optimizer(KernelContext& ctx, F&& update) {
  const OptimizerInputs in = optimizer_inputs(ctx, static_cast<int>(kGroups));
  for (int i = 0; i < in.n; ++i) {
    std::array<std::vector<double>, kGroups> args;
    for (size_t g = 0; g < kGroups; ++g) {
      args[g] = tensor_to_doubles(ctx.input(2 + static_cast<int>(g) * in.n + i));
    }
    std::array<std::vector<double>, kGroups - 1> results;
    for (auto& r : results) r.resize(args[0].size());
    for (size_t e = 0; e < args[0].size(); ++e) {
      std::array<double, kGroups> a;
      for (size_t g = 0; g < kGroups; ++g) a[g] = args[g][e];
      std::array<double, kGroups - 1> out = update(in, a);
      for (size_t g = 0; g + 1 < kGroups; ++g) results[g][e] = out[g];
    }
    for (size_t g = 0; g + 1 < kGroups; ++g) {
      const int o = static_cast<int>(g) * in.n + i;
      if (o < ctx.num_outputs()) store_doubles(results[g], ctx.output(o));
    }
  }
}

}  // namespace

template <>
Status run_op(const ops::NegativeLogLikelihoodLoss& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  return run_loss(ctx, tensor_to_doubles(x), x.shape(), op.ignore_index, op.reduction);
}

template <>
Status run_op(const ops::SoftmaxCrossEntropyLoss& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.shape()[0];
  const int64_t classes = x.shape()[1];
  const int64_t d = x.shape().numel(2, x.rank());
  std::vector<double> logp = tensor_to_doubles(x);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      auto at = [&](int64_t c) -> double& {
        return logp[static_cast<size_t>((i * classes + c) * d + j)];
      };
      double top = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) top = std::max(top, at(c));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(at(c) - top);
      const double log_sum = std::log(sum);
      for (int64_t c = 0; c < classes; ++c) at(c) = at(c) - top - log_sum;
    }
  }
  if (ctx.num_outputs() > 1) store_doubles(logp, ctx.output(1));
  return run_loss(ctx, logp, x.shape(), op.ignore_index, op.reduction);
}

template <>
Status run_op(const ops::StringNormalizer& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sensitive = op.is_case_sensitive != 0;
  std::set<std::string> stop;
  for (const std::string& s : op.stopwords) stop.insert(sensitive ? s : ascii_lower(s));
  std::vector<std::string> kept;
  for (const std::string& s : x.span<std::string>()) {
    if (stop.count(sensitive ? s : ascii_lower(s))) continue;
    if (op.case_change_action == "LOWER") {
      kept.push_back(ascii_lower(s));
    } else if (op.case_change_action == "UPPER") {
      kept.push_back(ascii_upper(s));
    } else {
      kept.push_back(s);
    }
  }
  if (kept.empty()) kept.emplace_back();
  const auto c = static_cast<int64_t>(kept.size());
  Shape shape = x.rank() == 2 ? Shape{1, c} : Shape{c};
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kString, shape));
  std::move(kept.begin(), kept.end(), out->data<std::string>());
  return Status();
}

template <>
Status run_op(const ops::TfIdfVectorizer& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) {
    std::vector<std::string> values(x.span<std::string>().begin(), x.span<std::string>().end());
    return run_tfidf(op, ctx, values, op.pool_strings);
  }
  return run_tfidf(op, ctx, tensor_to_ints(x), *op.pool_int64s);
}

template <>
Status run_op(const ops::Adagrad& op, KernelContext& ctx) {
  run_optimizer<3>(ctx, [&](const OptimizerInputs& in, const std::array<double, 3>& a) {
    const auto [x, g, h] = a;
    const double r = in.r / (1.0 + static_cast<double>(in.t) * op.decay_factor);
    const double g_reg = op.norm_coefficient * x + g;
    const double h_new = h + g_reg * g_reg;
    const double x_new = x - r * g_reg / (std::sqrt(h_new) + op.epsilon);
    return std::array<double, 2>{x_new, h_new};
  });
  return Status();
}

template <>
Status run_op(const ops::Adam& op, KernelContext& ctx) {
  run_optimizer<4>(ctx, [&](const OptimizerInputs& in, const std::array<double, 4>& a) {
    const auto [x, g, v, h] = a;
    const double alpha = op.alpha;
    const double beta = op.beta;
    const double g_reg = op.norm_coefficient * x + g;
    const double v_new = alpha * v + (1.0 - alpha) * g_reg;
    const double h_new = beta * h + (1.0 - beta) * g_reg * g_reg;
    double r = in.r;
    if (in.t > 0) {
      const auto t = static_cast<double>(in.t);
      r = r * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t));
    }
    const double x_new = x - r * v_new / (std::sqrt(h_new) + op.epsilon);
    return std::array<double, 3>{(1.0 - op.norm_coefficient_post) * x_new, v_new, h_new};
  });
  return Status();
}

template <>
Status run_op(const ops::Momentum& op, KernelContext& ctx) {
  const bool nesterov = *op.mode == "nesterov";
  run_optimizer<3>(ctx, [&](const OptimizerInputs& in, const std::array<double, 3>& a) {
    const auto [x, g, v] = a;
    const double alpha = *op.alpha;
    const double g_reg = *op.norm_coefficient * x + g;
    const double beta = in.t > 0 ? *op.beta : 1.0;
    const double v_new = alpha * v + beta * g_reg;
    const double x_new = nesterov ? x - in.r * (g_reg + alpha * v_new) : x - in.r * v_new;
    return std::array<double, 2>{x_new, v_new};
  });
  return Status();
}

}  // namespace kiln::compiler::ref
