// SPDX-License-Identifier: Apache-2.0
// Output comparison for the differential tester.
#include "tests/differential/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::differential {

namespace {

// The elements as doubles (strings and other non-numbers: none).
std::vector<double> as_doubles(const Tensor& t, bool* integral) {
  std::vector<double> v;
  *integral = false;
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T>) {
      *integral = std::is_integral_v<T>;
      for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<double>(t.data<T>()[i]));
    } else if constexpr (std::is_constructible_v<float, T>) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        v.push_back(static_cast<double>(static_cast<float>(t.data<T>()[i])));
      }
    }
  });
  return v;
}

}  // namespace

std::string index_string(const Shape& shape, int64_t index) {
  std::vector<int64_t> at(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank(); d-- > 0;) {
    const int64_t n = std::max<int64_t>(shape[d], 1);
    at[static_cast<size_t>(d)] = index % n;
    index /= n;
  }
  return fmt::format("[{}]", fmt::join(at, ","));
}

Comparison compare(const Tensor& ref, const Tensor& got, const Tolerance& tolerance) {
  Comparison c;
  if (ref.dtype() != got.dtype() || ref.shape() != got.shape()) {
    c.ok = false;
    c.problem =
        fmt::format("ref gives {}{}, the target {}{}", dtype_name(ref.dtype()),
                    ref.shape().to_string(), dtype_name(got.dtype()), got.shape().to_string());
    return c;
  }
  bool integral = false;
  const std::vector<double> a = as_doubles(ref, &integral);
  const std::vector<double> b = as_doubles(got, &integral);
  if (a.size() != static_cast<size_t>(ref.numel())) {
    c.ok = ref.equals(got);
    if (!c.ok) c.problem = "the elements differ";
    return c;
  }
  for (double x : a) {
    if (std::isfinite(x)) c.range = std::max(c.range, std::abs(x));
  }
  double quantum = 0;
  if (tolerance.quantum_steps > 0 && !integral) {
    std::vector<double> sorted;
    for (double x : a) {
      if (std::isfinite(x)) sorted.push_back(x);
    }
    std::sort(sorted.begin(), sorted.end());
    double step = INFINITY;
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i] > sorted[i - 1]) step = std::min(step, sorted[i] - sorted[i - 1]);
    }
    if (std::isfinite(step)) {
      quantum = std::min(tolerance.quantum_steps * step, tolerance.quantum_cap * c.range);
    }
  }
  for (size_t i = 0; i < a.size(); ++i) {
    double ratio = 0;
    double tol = 0;
    const double x = a[i];
    const double y = b[i];
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      ratio = same ? 0 : INFINITY;
    } else {
      tol = integral ? 0.0
                     : tolerance.range_fraction * c.range + tolerance.value_fraction * std::abs(x) +
                           quantum;
      const double err = std::abs(x - y);
      ratio = err == 0 ? 0 : (tol > 0 ? err / tol : INFINITY);
    }
    if (ratio > 1) ++c.bad;
    if (c.worst < 0 || ratio > c.worst_ratio) {
      c.worst = static_cast<int64_t>(i);
      c.worst_ratio = ratio;
      c.ref = x;
      c.got = y;
      c.tolerance = tol;
    }
  }
  c.ok = c.bad == 0;
  return c;
}

}  // namespace kiln::differential
