// SPDX-License-Identifier: Apache-2.0
// The quantize op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// QuantizeLinear: see the ONNX operator documentation (opset 13).
struct QuantizeLinear {
  static constexpr OpKind kKind = OpKind::kQuantizeLinear;
  int64_t axis = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// DequantizeLinear: see the ONNX operator documentation (opset 13).
struct DequantizeLinear {
  static constexpr OpKind kKind = OpKind::kDequantizeLinear;
  int64_t axis = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// DynamicQuantizeLinear: see the ONNX operator documentation (opset 11).
struct DynamicQuantizeLinear {
  static constexpr OpKind kKind = OpKind::kDynamicQuantizeLinear;
  template <class V>
  void reflect(V&) {}
};

// ConvInteger: see the ONNX operator documentation (opset 10).
struct ConvInteger {
  static constexpr OpKind kKind = OpKind::kConvInteger;
  std::string auto_pad = "NOTSET";
  std::optional<std::vector<int64_t>> dilations;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("dilations", dilations);
    v("group", group);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// MatMulInteger: see the ONNX operator documentation (opset 10).
struct MatMulInteger {
  static constexpr OpKind kKind = OpKind::kMatMulInteger;
  template <class V>
  void reflect(V&) {}
};

// QLinearConv: see the ONNX operator documentation (opset 10).
struct QLinearConv {
  static constexpr OpKind kKind = OpKind::kQLinearConv;
  std::string auto_pad = "NOTSET";
  std::optional<std::vector<int64_t>> dilations;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("dilations", dilations);
    v("group", group);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// QLinearMatMul: see the ONNX operator documentation (opset 10).
struct QLinearMatMul {
  static constexpr OpKind kKind = OpKind::kQLinearMatMul;
  template <class V>
  void reflect(V&) {}
};

}  // namespace kiln::compiler::ops
