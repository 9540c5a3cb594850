// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the attention family's ref kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/targets/ref/convert.h"
#include "core/dtype.h"

namespace kiln::compiler::ref {

// `v` rounded to the float element type `dtype` (f16, bf16, f32; f64 leaves it as it is), as a
// double: where the ONNX function body of an op holds a value in that type.
inline double round_to(DType dtype, double v) {
  double out = v;
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (kIsFloat<T>) out = to_double(from_double<T>(v));
  });
  return out;
}

// Every value of `values` rounded to `dtype`.
inline void round_all(DType dtype, std::vector<double>& values) {
  for (double& v : values) v = round_to(dtype, v);
}

// A [batch, length, heads * size] tensor's values as [batch, heads, length, size].
inline std::vector<double> split_heads(const std::vector<double>& packed, int64_t batch,
                                       int64_t length, int64_t heads, int64_t size) {
  std::vector<double> out(packed.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t l = 0; l < length; ++l) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < size; ++d) {
          out[static_cast<size_t>(((b * heads + h) * length + l) * size + d)] =
              packed[static_cast<size_t>(((b * length + l) * heads + h) * size + d)];
        }
      }
    }
  }
  return out;
}

// The inverse of split_heads: [batch, heads, length, size] as [batch, length, heads * size].
inline std::vector<double> merge_heads(const std::vector<double>& split, int64_t batch,
                                       int64_t length, int64_t heads, int64_t size) {
  std::vector<double> out(split.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t l = 0; l < length; ++l) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < size; ++d) {
          out[static_cast<size_t>(((b * length + l) * heads + h) * size + d)] =
              split[static_cast<size_t>(((b * heads + h) * length + l) * size + d)];
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::compiler::ref
