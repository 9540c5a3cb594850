// SPDX-License-Identifier: Apache-2.0
// Helpers of the nn family's ref kernels.
#include "compiler/targets/ref/nn_util.h"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::compiler::ref {

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
