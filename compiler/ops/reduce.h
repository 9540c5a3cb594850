// SPDX-License-Identifier: Apache-2.0
// The reduce op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// The Reduce* ops share one form: the reduced axes come from the `axes` attribute, or from an
// optional second input when ONNX gives them as a non-constant input (ReduceSum since opset 13,
// the others since 18); a constant axes input is folded into the attribute at import. Absent or
// empty axes reduce every axis, unless noop_with_empty_axes is set (then the op is an identity).

// ReduceL1: see the ONNX operator documentation (opset 13).
struct ReduceL1 {
  static constexpr OpKind kKind = OpKind::kReduceL1;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceL2: see the ONNX operator documentation (opset 13).
struct ReduceL2 {
  static constexpr OpKind kKind = OpKind::kReduceL2;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceLogSum: see the ONNX operator documentation (opset 13).
struct ReduceLogSum {
  static constexpr OpKind kKind = OpKind::kReduceLogSum;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceLogSumExp: see the ONNX operator documentation (opset 13).
struct ReduceLogSumExp {
  static constexpr OpKind kKind = OpKind::kReduceLogSumExp;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceMax: see the ONNX operator documentation (opset 13).
struct ReduceMax {
  static constexpr OpKind kKind = OpKind::kReduceMax;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceMean: see the ONNX operator documentation (opset 13).
struct ReduceMean {
  static constexpr OpKind kKind = OpKind::kReduceMean;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceMin: see the ONNX operator documentation (opset 13).
struct ReduceMin {
  static constexpr OpKind kKind = OpKind::kReduceMin;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceProd: see the ONNX operator documentation (opset 13).
struct ReduceProd {
  static constexpr OpKind kKind = OpKind::kReduceProd;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceSum: see the ONNX operator documentation (opset 13).
struct ReduceSum {
  static constexpr OpKind kKind = OpKind::kReduceSum;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ReduceSumSquare: see the ONNX operator documentation (opset 13).
struct ReduceSumSquare {
  static constexpr OpKind kKind = OpKind::kReduceSumSquare;
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noop_with_empty_axes = 0;

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
    v("keepdims", keepdims);
    v("noop_with_empty_axes", noop_with_empty_axes);
  }
};

// ArgMax: see the ONNX operator documentation (opset 13).
struct ArgMax {
  static constexpr OpKind kKind = OpKind::kArgMax;
  int64_t axis = 0;
  int64_t keepdims = 1;
  int64_t select_last_index = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("keepdims", keepdims);
    v("select_last_index", select_last_index);
  }
};

// ArgMin: see the ONNX operator documentation (opset 13).
struct ArgMin {
  static constexpr OpKind kKind = OpKind::kArgMin;
  int64_t axis = 0;
  int64_t keepdims = 1;
  int64_t select_last_index = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("keepdims", keepdims);
    v("select_last_index", select_last_index);
  }
};

// CumSum: see the ONNX operator documentation (opset 14).
struct CumSum {
  static constexpr OpKind kKind = OpKind::kCumSum;
  int64_t exclusive = 0;
  int64_t reverse = 0;

  template <class V>
  void reflect(V& v) {
    v("exclusive", exclusive);
    v("reverse", reverse);
  }
};

// CumProd: see the ONNX operator documentation (opset 26).
struct CumProd {
  static constexpr OpKind kKind = OpKind::kCumProd;
  int64_t exclusive = 0;
  int64_t reverse = 0;

  template <class V>
  void reflect(V& v) {
    v("exclusive", exclusive);
    v("reverse", reverse);
  }
};

// TopK: see the ONNX operator documentation (opset 11).
struct TopK {
  static constexpr OpKind kKind = OpKind::kTopK;
  int64_t axis = -1;
  int64_t largest = 1;
  int64_t sorted = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("largest", largest);
    v("sorted", sorted);
  }
};

}  // namespace kiln::compiler::ops
