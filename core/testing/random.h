// SPDX-License-Identifier: Apache-2.0
// Tests' helpers: reproducible random floats and f32 tensors (uniform in [-scale, scale]).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor random_tensor(Shape shape, uint32_t seed, float scale) {
  Tensor t(DType::kF32, std::move(shape));
  const std::vector<float> v = random_floats(static_cast<size_t>(t.numel()), seed, scale);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

}  // namespace kiln::test
