// SPDX-License-Identifier: Apache-2.0
// Tests' helper: f32 tensors compared element by element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace kiln::test {

// Success when `got` has `want`'s shape and every element lies within tol + tol * |want| of it;
// otherwise the first element that does not, by index.
inline ::testing::AssertionResult all_close(const Tensor& want, const Tensor& got, float tol) {
  if (want.shape() != got.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << got.shape().to_string() << ", want " << want.shape().to_string();
  }
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float a = want.data<float>()[i];
    const float g = got.data<float>()[i];
    if (!(std::abs(a - g) <= tol + tol * std::abs(a))) {
      return ::testing::AssertionFailure() << "element " << i << ": want " << a << ", got " << g;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::test
