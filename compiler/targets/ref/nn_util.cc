// SPDX-License-Identifier: Apache-2.0
// Helpers of the nn family's ref kernels.
#include "compiler/targets/ref/nn_util.h"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::compiler::ref {

void store_doubles(std::span<const double> values, Tensor& out) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == out.numel(), "store_doubles: size mismatch");
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) {
      KILN_CHECK(false, "store_doubles: string tensor");
    } else {
      T* p = out.data<T>();
      for (size_t i = 0; i < values.size(); ++i) {
        const double v = values[i];
        if constexpr (std::is_same_v<T, bool>) {
          p[i] = v != 0;
        } else if constexpr (std::is_integral_v<T>) {
          constexpr auto lo = static_cast<double>(std::numeric_limits<T>::lowest());
          constexpr auto hi = static_cast<double>(std::numeric_limits<T>::max());
          p[i] = std::isnan(v) ? T{0}
                 : v <= lo     ? std::numeric_limits<T>::lowest()
                 : v >= hi     ? std::numeric_limits<T>::max()
                               : static_cast<T>(std::nearbyint(v));
        } else if constexpr (std::is_same_v<T, double>) {
          p[i] = v;
        } else {
          p[i] = T(static_cast<float>(v));
        }
      }
    }
  });
}

void window_offsets(const WindowGeometry& g, std::span<const int64_t> in,
                    std::span<const int64_t> out_index, std::vector<int64_t>& offsets) {
  const size_t n = in.size();
  int64_t count = 1;
  for (int64_t k : g.kernel) count *= k;
  offsets.resize(static_cast<size_t>(count));
  std::vector<int64_t> start(n);
  for (size_t a = 0; a < n; ++a) start[a] = out_index[a] * g.strides[a] - g.pad_begin[a];
  size_t i = 0;
  for_each_index(g.kernel, [&](const std::vector<int64_t>& k) {
    int64_t offset = 0;
    for (size_t a = 0; a < n; ++a) {
      const int64_t pos = start[a] + k[a] * g.dilations[a];
      if (pos < 0 || pos >= in[a]) {
        offset = -1;
        break;
      }
      offset = offset * in[a] + pos;
    }
    offsets[i++] = offset;
  });
}

}  // namespace kiln::compiler::ref
