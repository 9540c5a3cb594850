// SPDX-License-Identifier: Apache-2.0
// The random op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Bernoulli: see the ONNX operator documentation (opset 15).
struct Bernoulli {
  static constexpr OpKind kKind = OpKind::kBernoulli;
  std::optional<DType> dtype;
  std::optional<float> seed;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("seed", seed);
  }
};

// RandomUniform: see the ONNX operator documentation (opset 1).
struct RandomUniform {
  static constexpr OpKind kKind = OpKind::kRandomUniform;
  DType dtype = DType::kF32;
  float high = 1.0f;
  float low = 0.0f;
  std::optional<float> seed;
  std::optional<std::vector<int64_t>> shape;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("high", high);
    v("low", low);
    v("seed", seed);
    v("shape", shape);
  }
};

// RandomUniformLike: see the ONNX operator documentation (opset 1).
struct RandomUniformLike {
  static constexpr OpKind kKind = OpKind::kRandomUniformLike;
  std::optional<DType> dtype;
  float high = 1.0f;
  float low = 0.0f;
  std::optional<float> seed;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("high", high);
    v("low", low);
    v("seed", seed);
  }
};

// RandomNormal: see the ONNX operator documentation (opset 1).
struct RandomNormal {
  static constexpr OpKind kKind = OpKind::kRandomNormal;
  DType dtype = DType::kF32;
  float mean = 0.0f;
  float scale = 1.0f;
  std::optional<float> seed;
  std::optional<std::vector<int64_t>> shape;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("mean", mean);
    v("scale", scale);
    v("seed", seed);
    v("shape", shape);
  }
};

// RandomNormalLike: see the ONNX operator documentation (opset 1).
struct RandomNormalLike {
  static constexpr OpKind kKind = OpKind::kRandomNormalLike;
  std::optional<DType> dtype;
  float mean = 0.0f;
  float scale = 1.0f;
  std::optional<float> seed;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("mean", mean);
    v("scale", scale);
    v("seed", seed);
  }
};

// Multinomial: see the ONNX operator documentation (opset 7).
struct Multinomial {
  static constexpr OpKind kKind = OpKind::kMultinomial;
  DType dtype = DType::kI32;
  int64_t sample_size = 1;
  std::optional<float> seed;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("sample_size", sample_size);
    v("seed", seed);
  }
};

}  // namespace kiln::compiler::ops
