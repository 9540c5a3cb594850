// SPDX-License-Identifier: Apache-2.0
// Histogram calibration: max-abs, percentile and entropy (KL divergence) thresholds.
#include "compiler/quantize/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::compiler {

RangeObserver::RangeObserver(int bins) : histogram_(static_cast<size_t>(std::max(bins, 16)), 0.0) {}

void RangeObserver::grow_to(double max_abs) {
  if (range_ == 0) {
    range_ = max_abs;
    return;
  }
  int doublings = 0;
  double range = range_;
  while (range < max_abs) {
    range *= 2;
    ++doublings;
  }
  if (doublings == 0) return;
  // Each doubling merges bin pairs: new bin j holds old bins 2j and 2j+1.
  const size_t n = histogram_.size();
  for (int d = 0; d < doublings; ++d) {
    std::vector<double> merged(n, 0.0);
    for (size_t j = 0; j < n; ++j) merged[j / 2] += histogram_[j];
    histogram_ = std::move(merged);
  }
  range_ = range;
}

void RangeObserver::observe(const float* values, int64_t count) {
  if (count <= 0) return;
  float lo = values[0];
  float hi = values[0];
  for (int64_t i = 1; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  min_ = count_ == 0 ? lo : std::min(min_, static_cast<double>(lo));
  max_ = count_ == 0 ? hi : std::max(max_, static_cast<double>(hi));
  count_ += count;
  const double batch_max =
      std::max(std::abs(static_cast<double>(lo)), std::abs(static_cast<double>(hi)));
  if (batch_max > range_) grow_to(batch_max);
  if (range_ == 0) {
    histogram_[0] += static_cast<double>(count);
    return;
  }
  const double n = static_cast<double>(histogram_.size());
  const double per_unit = n / range_;
  const size_t last = histogram_.size() - 1;
  for (int64_t i = 0; i < count; ++i) {
    const double bin = std::abs(static_cast<double>(values[i])) * per_unit;
    histogram_[std::min(static_cast<size_t>(bin), last)] += 1.0;
  }
}

void RangeObserver::observe_range(double lo, double hi, int64_t count) {
  if (count <= 0) return;
  min_ = count_ == 0 ? lo : std::min(min_, lo);
  max_ = count_ == 0 ? hi : std::max(max_, hi);
  count_ += count;
}

void RangeObserver::observe(const Tensor& values) {
  if (values.dtype() == DType::kF32) {
    observe(values.data<float>(), values.numel());
    return;
  }
  std::vector<float> converted(static_cast<size_t>(values.numel()));
  visit_dtype(values.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      const T* p = values.data<T>();
      for (size_t i = 0; i < converted.size(); ++i) converted[i] = static_cast<float>(p[i]);
    } else {
      KILN_CHECK(false, "RangeObserver::observe: not a float tensor");
    }
  });
  observe(converted.data(), values.numel());
}

double RangeObserver::max_abs() const {
  return std::max(std::abs(min_), std::abs(max_));
}

double RangeObserver::percentile(double percentile) const {
  if (count_ == 0 || range_ == 0) return 0;
  const double target = std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(count_);
  const double width = range_ / static_cast<double>(histogram_.size());
  double cumulative = 0;
  for (size_t i = 0; i < histogram_.size(); ++i) {
    cumulative += histogram_[i];
    if (cumulative >= target) return std::min(static_cast<double>(i + 1) * width, max_abs());
  }
  return max_abs();
}

namespace {

// KL(p || q) of two unnormalised histograms of the same length; a q bin that is empty where p is
// not counts as a tiny probability rather than infinity, as in TensorRT's calibrator.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double p_sum = 0;
  double q_sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    p_sum += p[i];
    q_sum += q[i];
  }
  if (p_sum == 0 || q_sum == 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double pi = p[i] / p_sum;
    const double qi = std::max(q[i] / q_sum, 1e-12);
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

double RangeObserver::entropy_threshold(int levels) const {
  if (count_ == 0 || range_ == 0) return 0;
  levels = std::max(levels, 2);
  // KL over a histogram far larger than the sample says little: a few thousand values in 2,048
  // bins leave most of them empty, and a tight clip then looks as good as any (a small model's
  // last layers, calibrated on a hundred images, lost a point of accuracy to it). Bin pairs are
  // merged until the bins hold kMinPerBin values on average or as few bins as levels remain;
  // at that floor the whole range is the only candidate, as with the max method.
  // Counted without the first bin, which holds a ReLU's zeros.
  constexpr double kMinPerBin = 32;
  std::vector<double> merged = histogram_;  // copied, then merged
  auto spread = [&] {
    double total = 0;
    for (size_t i = 1; i < merged.size(); ++i) total += merged[i];
    return total / static_cast<double>(merged.size());
  };
  while (merged.size() / 2 >= static_cast<size_t>(levels) && spread() < kMinPerBin) {
    std::vector<double> half(merged.size() / 2);
    for (size_t i = 0; i < half.size(); ++i) half[i] = merged[2 * i] + merged[2 * i + 1];
    merged = std::move(half);
  }
  // The first bin holds a ReLU's zeros: as a spike it would outweigh the tail that the clip
  // decides, so it counts as much as its neighbour (as NVIDIA's pytorch-quantization does).
  if (merged.size() > 1) merged[0] = merged[1];
  const std::vector<double>& bins = merged;
  const size_t n = bins.size();
  const double width = range_ / static_cast<double>(n);
  double best_kl = std::numeric_limits<double>::infinity();
  size_t best = n;
  std::vector<double> suffix(n + 1, 0.0);
  for (size_t i = n; i-- > 0;) suffix[i] = suffix[i + 1] + bins[i];
  std::vector<double> p;
  std::vector<double> q;
  for (size_t i = static_cast<size_t>(levels); i <= n; ++i) {
    // The reference: the first i bins, with everything beyond them clipped into the last.
    p.assign(bins.begin(), bins.begin() + static_cast<std::ptrdiff_t>(i));
    p[i - 1] += suffix[i];
    // The candidate: the first i bins merged into `levels` levels, then spread back evenly over
    // the bins that were not empty.
    q.assign(i, 0.0);
    for (int level = 0; level < levels; ++level) {
      const size_t lo = i * static_cast<size_t>(level) / static_cast<size_t>(levels);
      const size_t hi = i * static_cast<size_t>(level + 1) / static_cast<size_t>(levels);
      double sum = 0;
      int nonzero = 0;
      for (size_t j = lo; j < hi; ++j) {
        sum += bins[j];
        nonzero += bins[j] != 0 ? 1 : 0;
      }
      if (nonzero == 0) continue;
      for (size_t j = lo; j < hi; ++j) {
        if (bins[j] != 0) q[j] = sum / nonzero;
      }
    }
    const double kl = kl_divergence(p, q);
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return std::min(static_cast<double>(best) * width, max_abs());
}

double RangeObserver::threshold(CalibrationMethod method, double percentile_value,
                                int levels) const {
  switch (method) {
    case CalibrationMethod::kMax: return max_abs();
    case CalibrationMethod::kPercentile: return percentile(percentile_value);
    case CalibrationMethod::kEntropy: return entropy_threshold(levels);
  }
  return max_abs();
}

Result<std::vector<CalibrationBatch>> rebatch_calibration(const Graph& graph,
                                                          std::vector<CalibrationBatch> batches) {
  int64_t want = -1;  // the fixed batch the graph takes
  for (const Value* in : graph.inputs()) {
    if (!in->type().is_tensor() || !in->tensor_type().has_rank()) continue;
    const TensorType& t = in->tensor_type();
    if (t.rank() < 1 || !(*t.dims)[0].known()) return batches;  // a dynamic batch takes any
    want = want < 0 ? (*t.dims)[0].value : std::min(want, (*t.dims)[0].value);
  }
  if (want <= 0) return batches;
  bool already = true;
  for (const CalibrationBatch& b : batches) {
    for (const auto& [name, t] : b) already = already && t.rank() >= 1 && t.shape()[0] == want;
  }
  if (already) return batches;
  // Every input's samples, joined in order; then cut into batches of `want`.
  std::vector<CalibrationBatch> out;
  int64_t samples = -1;
  for (const Value* in : graph.inputs()) {
    const TensorType& t = in->tensor_type();
    if (!t.is_static()) continue;
    const Shape graph_shape = t.shape();
    const int64_t per_sample = graph_shape.numel(1, graph_shape.rank());
    const size_t sample_bytes = static_cast<size_t>(per_sample) * dtype_size(t.dtype);
    std::vector<uint8_t> joined;
    int64_t count = 0;
    for (size_t i = 0; i < batches.size(); ++i) {
      auto found = batches[i].find(in->name());
      if (found == batches[i].end()) continue;  // named when the batches are read
      const Tensor& x = found->second;
      bool fits = x.dtype() == t.dtype && x.rank() == graph_shape.rank();
      for (int d = 1; fits && d < x.rank(); ++d) fits = x.shape()[d] == graph_shape[d];
      if (!fits) {
        return invalid_argument_error(fmt::format(
            "calibration batch {}: input \"{}\" is {}{}; the model takes {} (any number of "
            "samples in the first dim)",
            i, in->name(), dtype_name(x.dtype()), x.shape().to_string(), t.to_string()));
      }
      const auto* bytes = static_cast<const uint8_t*>(x.raw_data());
      joined.insert(joined.end(), bytes, bytes + x.nbytes());
      count += x.shape()[0];
    }
    if (count < want) {
      return invalid_argument_error(fmt::format(
          "calibration: input \"{}\" takes batches of {} (the compile batch); the calibration "
          "data holds {} samples in all: give at least {}, or compile with a dynamic batch",
          in->name(), want, count, want));
    }
    if (samples >= 0 && count != samples) {
      return invalid_argument_error(fmt::format(
          "calibration: input \"{}\" has {} samples in all, another input {}; give each input "
          "the same number of samples",
          in->name(), count, samples));
    }
    samples = count;
    out.resize(static_cast<size_t>(count / want));
    for (size_t b = 0; b < out.size(); ++b) {
      Tensor cut(t.dtype, graph_shape);
      std::memcpy(cut.raw_data(), joined.data() + b * static_cast<size_t>(want) * sample_bytes,
                  static_cast<size_t>(want) * sample_bytes);
      out[b].emplace(in->name(), std::move(cut));
    }
  }
  return out;
}

}  // namespace kiln::compiler
