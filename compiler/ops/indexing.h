// SPDX-License-Identifier: Apache-2.0
// The indexing op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Gather: see the ONNX operator documentation (opset 13).
struct Gather {
  static constexpr OpKind kKind = OpKind::kGather;
  int64_t axis = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// GatherElements: see the ONNX operator documentation (opset 13).
struct GatherElements {
  static constexpr OpKind kKind = OpKind::kGatherElements;
  int64_t axis = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// GatherND: see the ONNX operator documentation (opset 13).
struct GatherND {
  static constexpr OpKind kKind = OpKind::kGatherND;
  int64_t batch_dims = 0;

  template <class V>
  void reflect(V& v) {
    v("batch_dims", batch_dims);
  }
};

// Scatter: see the ONNX operator documentation (opset 11).
struct Scatter {
  static constexpr OpKind kKind = OpKind::kScatter;
  int64_t axis = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// ScatterElements: see the ONNX operator documentation (opset 16).
struct ScatterElements {
  static constexpr OpKind kKind = OpKind::kScatterElements;
  int64_t axis = 0;
  std::string reduction = "none";

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("reduction", reduction);
  }
};

// ScatterND: see the ONNX operator documentation (opset 16).
struct ScatterND {
  static constexpr OpKind kKind = OpKind::kScatterND;
  std::string reduction = "none";

  template <class V>
  void reflect(V& v) {
    v("reduction", reduction);
  }
};

// OneHot: see the ONNX operator documentation (opset 11).
struct OneHot {
  static constexpr OpKind kKind = OpKind::kOneHot;
  int64_t axis = -1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// Compress: see the ONNX operator documentation (opset 11).
struct Compress {
  static constexpr OpKind kKind = OpKind::kCompress;
  std::optional<int64_t> axis;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// NonZero: see the ONNX operator documentation (opset 13).
struct NonZero {
  static constexpr OpKind kKind = OpKind::kNonZero;
  template <class V>
  void reflect(V&) {}
};

// Unique: see the ONNX operator documentation (opset 11).
struct Unique {
  static constexpr OpKind kKind = OpKind::kUnique;
  std::optional<int64_t> axis;
  int64_t sorted = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("sorted", sorted);
  }
};

// ReverseSequence: see the ONNX operator documentation (opset 10).
struct ReverseSequence {
  static constexpr OpKind kKind = OpKind::kReverseSequence;
  int64_t batch_axis = 1;
  int64_t time_axis = 0;

  template <class V>
  void reflect(V& v) {
    v("batch_axis", batch_axis);
    v("time_axis", time_axis);
  }
};

}  // namespace kiln::compiler::ops
