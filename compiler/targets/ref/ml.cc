// SPDX-License-Identifier: Apache-2.0
// ref kernels for the ml op family (the ai.onnx.ml domain): plain loops, in double.
#include "compiler/ops/ml.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "compiler/ops/infer_util.h"
#include "compiler/ops/ml_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// A key as a map key: strings as themselves, numbers by value, every NaN alike.
struct Key {
  std::string text;
  double number = 0;
  bool nan = false;
  friend bool operator<(const Key& a, const Key& b) {
    if (a.nan != b.nan) return a.nan < b.nan;
    if (a.number != b.number) return a.number < b.number;
    return a.text < b.text;
  }
};

template <class T>
Key key_of(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return {v, 0, false};
  } else {
    const auto d = static_cast<double>(v);
    return {"", std::isnan(d) ? 0.0 : d, std::isnan(d)};
  }
}

// The inverse of the standard normal CDF, by Newton steps on erfc from a rational start.
double probit(double p) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  double x = 0.0;
  for (int i = 0; i < 100; ++i) {
    const double err = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
    const double density = std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
    const double step = err / density;
    x -= step;
    if (std::fabs(step) < 1e-15) break;
  }
  return x;
}

void post_transform(int64_t kind, std::vector<double>& row) {
  switch (kind) {
    case 1:
    case 3: {  // softmax (3: zeros stay zero and take no share)
      const bool skip_zeros = kind == 3;
      double top = -std::numeric_limits<double>::infinity();
      for (double v : row) {
        if (!(skip_zeros && v == 0)) top = std::max(top, v);
      }
      double sum = 0;
      for (double& v : row) {
        v = skip_zeros && v == 0 ? 0 : std::exp(v - top);
        sum += v;
      }
      for (double& v : row) v = sum > 0 ? v / sum : 0;
      break;
    }
    case 2:
      for (double& v : row) v = 1 / (1 + std::exp(-v));
      break;
    case 4:
      for (double& v : row) v = probit(v);
      break;
    default: break;
  }
}

}  // namespace

template <>
Status run_op(const ops::LabelEncoder& op, KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(LabelTable table, ctx.named(label_table(op)));
  std::map<Key, int64_t> index;
  visit_dtype(table.keys.dtype(), [&]<class K>() {
    const K* keys = table.keys.data<K>();
    for (int64_t i = table.keys.numel(); i-- > 0;) index[key_of(keys[i])] = i;  // first one wins
  });
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  visit_dtype(x.dtype(), [&]<class X>() {
    visit_dtype(y.dtype(), [&]<class Y>() {
      const X* in = x.data<X>();
      Y* out = y.data<Y>();
      const Y* values = table.values.data<Y>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        auto it = index.find(key_of(in[i]));
        out[i] = it == index.end() ? table.fallback.data<Y>()[0] : values[it->second];
      }
    });
  });
  return Status();
}

template <>
Status run_op(const ops::TreeEnsemble& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rows = x.shape()[0], features = x.shape()[1];
  const int64_t targets = *op.n_targets;
  const std::vector<double> xv = tensor_to_doubles(x);
  const std::vector<double> splits = tensor_to_doubles(op.nodes_splits);
  const std::vector<double> weights = tensor_to_doubles(op.leaf_weights);
  const auto* modes = op.nodes_modes.data<uint8_t>();
  const size_t nodes = op.nodes_featureids.size();
  for (size_t i = 0; i < nodes; ++i) {
    if (op.nodes_featureids[i] < 0 || op.nodes_featureids[i] >= features) {
      return ctx.errorf("node {} reads feature {}, but the input has {}", i, op.nodes_featureids[i],
                        features);
    }
  }
  // The member sets, in node order.
  std::vector<std::vector<double>> sets(nodes);
  if (op.membership_values.defined()) {
    const std::vector<double> members = tensor_to_doubles(op.membership_values);
    size_t at = 0;
    for (size_t i = 0; i < nodes; ++i) {
      if (modes[i] != 6) continue;
      for (; at < members.size() && !std::isnan(members[at]); ++at) sets[i].push_back(members[at]);
      ++at;
    }
  }
  const auto goes_true = [&](size_t i, double v) {
    if (std::isnan(v) && !op.nodes_missing_value_tracks_true.empty() &&
        op.nodes_missing_value_tracks_true[i] != 0) {
      return true;
    }
    const double s = splits[i];
    switch (modes[i]) {
      case 0: return v <= s;
      case 1: return v < s;
      case 2: return v >= s;
      case 3: return v > s;
      case 4: return v == s;
      case 5: return v != s;
      default: return std::find(sets[i].begin(), sets[i].end(), v) != sets[i].end();
    }
  };
  const auto trees = static_cast<double>(op.tree_roots.size());
  std::vector<double> out;
  std::vector<double> row(static_cast<size_t>(targets));
  for (int64_t n = 0; n < rows; ++n) {
    const double start = op.aggregate_function == 2   ? std::numeric_limits<double>::max()
                         : op.aggregate_function == 3 ? std::numeric_limits<double>::lowest()
                                                      : 0.0;
    std::fill(row.begin(), row.end(), start);
    for (int64_t root : op.tree_roots) {
      auto i = static_cast<size_t>(root);
      size_t leaf = 0;
      // A root whose both sides are the same leaf is that leaf (a tree of one leaf).
      if (op.nodes_trueleafs[i] != 0 && op.nodes_falseleafs[i] != 0 &&
          op.nodes_truenodeids[i] == op.nodes_falsenodeids[i]) {
        leaf = i;
      } else {
        for (size_t steps = 0;; ++steps) {
          if (steps > nodes) return ctx.errorf("the tree at root {} has a cycle", root);
          const bool side =
              goes_true(i, xv[static_cast<size_t>(n * features + op.nodes_featureids[i])]);
          const auto next =
              static_cast<size_t>(side ? op.nodes_truenodeids[i] : op.nodes_falsenodeids[i]);
          if ((side ? op.nodes_trueleafs[i] : op.nodes_falseleafs[i]) != 0) {
            leaf = next;
            break;
          }
          i = next;
        }
      }
      double& target = row[static_cast<size_t>(op.leaf_targetids[leaf])];
      const double w = weights[leaf];
      switch (op.aggregate_function) {
        case 0: target += w / trees; break;
        case 2: target = std::min(target, w); break;
        case 3: target = std::max(target, w); break;
        default: target += w; break;
      }
    }
    post_transform(op.post_transform, row);
    out.insert(out.end(), row.begin(), row.end());
  }
  store_doubles(out, ctx.output(0));
  return Status();
}

}  // namespace kiln::compiler::ref
