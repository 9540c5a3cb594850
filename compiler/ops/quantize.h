// SPDX-License-Identifier: Apache-2.0
// The quantize op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// QuantizeLinear: see the ONNX operator documentation (opset 25). The scale is one value, one per
// slice along `axis`, or (block_size > 0; absent: 0) one per block of block_size elements along
// `axis`. The output type is the zero point's, else `output_dtype`, else u8; the division is done
// in `precision` (absent: the scale's type); `saturate` (absent: 1) applies to the float8 outputs.
struct QuantizeLinear {
  static constexpr OpKind kKind = OpKind::kQuantizeLinear;
  int64_t axis = 1;
  std::optional<int64_t> block_size;
  std::optional<DType> output_dtype;
  std::optional<DType> precision;
  std::optional<int64_t> saturate;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("block_size", block_size);
    v("output_dtype", output_dtype);
    v("precision", precision);
    v("saturate", saturate);
  }
};

// DequantizeLinear: see the ONNX operator documentation (opset 25). Scales as QuantizeLinear's;
// the output type is `output_dtype`, else the scale's.
struct DequantizeLinear {
  static constexpr OpKind kKind = OpKind::kDequantizeLinear;
  int64_t axis = 1;
  std::optional<int64_t> block_size;
  std::optional<DType> output_dtype;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("block_size", block_size);
    v("output_dtype", output_dtype);
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
  // kiln's own, not ONNX's: an activation ("SiLU") applied to the real-valued result before it is
  // quantized, set by qdq_fusion where a target's int8 convolutions apply it in their epilogue;
  // absent in imported models.
  std::optional<std::string> activation;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("dilations", dilations);
    v("group", group);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
    v("activation", activation);
  }
};

// QLinearMatMul: see the ONNX operator documentation (opset 21; f32, f16 or bf16 scales).
struct QLinearMatMul {
  static constexpr OpKind kKind = OpKind::kQLinearMatMul;
  template <class V>
  void reflect(V&) {}
};

}  // namespace kiln::compiler::ops
