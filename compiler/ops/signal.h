// SPDX-License-Identifier: Apache-2.0
// The signal op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// DFT: see the ONNX operator documentation (opset 17).
// From opset 20 the axis is input 2 (default -2): a constant one is folded into `axis` at import.
struct DFT {
  static constexpr OpKind kKind = OpKind::kDFT;
  int64_t axis = 1;
  int64_t inverse = 0;
  int64_t onesided = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("inverse", inverse);
    v("onesided", onesided);
  }
};

// STFT: see the ONNX operator documentation (opset 17).
struct STFT {
  static constexpr OpKind kKind = OpKind::kSTFT;
  int64_t onesided = 1;

  template <class V>
  void reflect(V& v) {
    v("onesided", onesided);
  }
};

// BlackmanWindow: see the ONNX operator documentation (opset 17).
struct BlackmanWindow {
  static constexpr OpKind kKind = OpKind::kBlackmanWindow;
  DType output_datatype = DType::kF32;
  int64_t periodic = 1;

  template <class V>
  void reflect(V& v) {
    v("output_datatype", output_datatype);
    v("periodic", periodic);
  }
};

// HammingWindow: see the ONNX operator documentation (opset 17).
struct HammingWindow {
  static constexpr OpKind kKind = OpKind::kHammingWindow;
  DType output_datatype = DType::kF32;
  int64_t periodic = 1;

  template <class V>
  void reflect(V& v) {
    v("output_datatype", output_datatype);
    v("periodic", periodic);
  }
};

// HannWindow: see the ONNX operator documentation (opset 17).
struct HannWindow {
  static constexpr OpKind kKind = OpKind::kHannWindow;
  DType output_datatype = DType::kF32;
  int64_t periodic = 1;

  template <class V>
  void reflect(V& v) {
    v("output_datatype", output_datatype);
    v("periodic", periodic);
  }
};

// MelWeightMatrix: see the ONNX operator documentation (opset 17).
struct MelWeightMatrix {
  static constexpr OpKind kKind = OpKind::kMelWeightMatrix;
  DType output_datatype = DType::kF32;

  template <class V>
  void reflect(V& v) {
    v("output_datatype", output_datatype);
  }
};

}  // namespace kiln::compiler::ops
