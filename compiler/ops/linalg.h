// SPDX-License-Identifier: Apache-2.0
// The linalg op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Gemm: see the ONNX operator documentation (opset 13).
struct Gemm {
  static constexpr OpKind kKind = OpKind::kGemm;
  float alpha = 1.0f;
  float beta = 1.0f;
  int64_t transA = 0;
  int64_t transB = 0;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("beta", beta);
    v("transA", transA);
    v("transB", transB);
  }
};

// MatMul: see the ONNX operator documentation (opset 13).
struct MatMul {
  static constexpr OpKind kKind = OpKind::kMatMul;
  template <class V>
  void reflect(V&) {}
};

// Einsum: see the ONNX operator documentation (opset 12).
struct Einsum {
  static constexpr OpKind kKind = OpKind::kEinsum;
  std::optional<std::string> equation;

  template <class V>
  void reflect(V& v) {
    v("equation", equation);
  }
};

// Det: see the ONNX operator documentation (opset 11).
struct Det {
  static constexpr OpKind kKind = OpKind::kDet;
  template <class V>
  void reflect(V&) {}
};

}  // namespace kiln::compiler::ops
