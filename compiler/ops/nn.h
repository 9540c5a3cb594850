// SPDX-License-Identifier: Apache-2.0
// The nn op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Conv: see the ONNX operator documentation (opset 11).
struct Conv {
  static constexpr OpKind kKind = OpKind::kConv;
  // kiln's own, not ONNX's: an activation fused into the output ("Relu"), set by
  // conv_activation_fusion; absent in imported models.
  std::optional<std::string> activation;
  std::string auto_pad = "NOTSET";
  std::optional<std::vector<int64_t>> dilations;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("activation", activation);
    v("auto_pad", auto_pad);
    v("dilations", dilations);
    v("group", group);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// ConvTranspose: see the ONNX operator documentation (opset 11).
struct ConvTranspose {
  static constexpr OpKind kKind = OpKind::kConvTranspose;
  std::string auto_pad = "NOTSET";
  std::optional<std::vector<int64_t>> dilations;
  int64_t group = 1;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> output_padding;
  std::optional<std::vector<int64_t>> output_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("dilations", dilations);
    v("group", group);
    v("kernel_shape", kernel_shape);
    v("output_padding", output_padding);
    v("output_shape", output_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// AveragePool: see the ONNX operator documentation (opset 11).
struct AveragePool {
  static constexpr OpKind kKind = OpKind::kAveragePool;
  std::string auto_pad = "NOTSET";
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;
  std::optional<std::vector<int64_t>> dilations;  // opset 19
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("ceil_mode", ceil_mode);
    v("count_include_pad", count_include_pad);
    v("dilations", dilations);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// MaxPool: see the ONNX operator documentation (opset 12).
struct MaxPool {
  static constexpr OpKind kKind = OpKind::kMaxPool;
  std::string auto_pad = "NOTSET";
  int64_t ceil_mode = 0;
  std::optional<std::vector<int64_t>> dilations;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  int64_t storage_order = 0;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("ceil_mode", ceil_mode);
    v("dilations", dilations);
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("storage_order", storage_order);
    v("strides", strides);
  }
};

// LpPool: see the ONNX operator documentation (opset 11).
struct LpPool {
  static constexpr OpKind kKind = OpKind::kLpPool;
  std::string auto_pad = "NOTSET";
  int64_t ceil_mode = 0;                          // opset 18
  std::optional<std::vector<int64_t>> dilations;  // opset 18
  std::optional<std::vector<int64_t>> kernel_shape;
  int64_t p = 2;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("auto_pad", auto_pad);
    v("ceil_mode", ceil_mode);
    v("dilations", dilations);
    v("kernel_shape", kernel_shape);
    v("p", p);
    v("pads", pads);
    v("strides", strides);
  }
};

// GlobalAveragePool: see the ONNX operator documentation (opset 1).
struct GlobalAveragePool {
  static constexpr OpKind kKind = OpKind::kGlobalAveragePool;
  template <class V>
  void reflect(V&) {}
};

// GlobalMaxPool: see the ONNX operator documentation (opset 1).
struct GlobalMaxPool {
  static constexpr OpKind kKind = OpKind::kGlobalMaxPool;
  template <class V>
  void reflect(V&) {}
};

// GlobalLpPool: see the ONNX operator documentation (opset 2).
struct GlobalLpPool {
  static constexpr OpKind kKind = OpKind::kGlobalLpPool;
  int64_t p = 2;

  template <class V>
  void reflect(V& v) {
    v("p", p);
  }
};

// MaxUnpool: see the ONNX operator documentation (opset 11).
struct MaxUnpool {
  static constexpr OpKind kKind = OpKind::kMaxUnpool;
  std::optional<std::vector<int64_t>> kernel_shape;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> strides;

  template <class V>
  void reflect(V& v) {
    v("kernel_shape", kernel_shape);
    v("pads", pads);
    v("strides", strides);
  }
};

// BatchNormalization: see the ONNX operator documentation (opset 15).
struct BatchNormalization {
  static constexpr OpKind kKind = OpKind::kBatchNormalization;
  float epsilon = 9.99999975e-06f;
  float momentum = 0.899999976f;
  int64_t training_mode = 0;

  template <class V>
  void reflect(V& v) {
    v("epsilon", epsilon);
    v("momentum", momentum);
    v("training_mode", training_mode);
  }
};

// InstanceNormalization: see the ONNX operator documentation (opset 6).
struct InstanceNormalization {
  static constexpr OpKind kKind = OpKind::kInstanceNormalization;
  float epsilon = 9.99999975e-06f;

  template <class V>
  void reflect(V& v) {
    v("epsilon", epsilon);
  }
};

// LayerNormalization: see the ONNX operator documentation (opset 17).
struct LayerNormalization {
  static constexpr OpKind kKind = OpKind::kLayerNormalization;
  int64_t axis = -1;
  float epsilon = 9.99999975e-06f;
  // The element type of the Mean and InvStdDev outputs and of the computation.
  DType stash_type = DType::kF32;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("epsilon", epsilon);
    v("stash_type", stash_type);
  }
};

// GroupNormalization: see the ONNX operator documentation (opset 21: scale and bias per channel;
// the importer expands opset 18's per-group ones).
struct GroupNormalization {
  static constexpr OpKind kKind = OpKind::kGroupNormalization;
  float epsilon = 9.99999975e-06f;
  std::optional<int64_t> num_groups;  // required
  // The element type of stage one (the normalization before scale and bias).
  DType stash_type = DType::kF32;

  template <class V>
  void reflect(V& v) {
    v("epsilon", epsilon);
    v("num_groups", num_groups);
    v("stash_type", stash_type);
  }
};

// LRN: see the ONNX operator documentation (opset 13).
struct LRN {
  static constexpr OpKind kKind = OpKind::kLRN;
  float alpha = 9.99999975e-05f;
  float beta = 0.75f;
  float bias = 1.0f;
  std::optional<int64_t> size;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("beta", beta);
    v("bias", bias);
    v("size", size);
  }
};

// MeanVarianceNormalization: see the ONNX operator documentation (opset 13).
struct MeanVarianceNormalization {
  static constexpr OpKind kKind = OpKind::kMeanVarianceNormalization;
  std::vector<int64_t> axes = {0, 2, 3};

  template <class V>
  void reflect(V& v) {
    v("axes", axes);
  }
};

// LpNormalization: see the ONNX operator documentation (opset 1).
struct LpNormalization {
  static constexpr OpKind kKind = OpKind::kLpNormalization;
  int64_t axis = -1;
  int64_t p = 2;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("p", p);
  }
};

// Dropout: see the ONNX operator documentation (opset 13).
struct Dropout {
  static constexpr OpKind kKind = OpKind::kDropout;
  std::optional<int64_t> seed;

  template <class V>
  void reflect(V& v) {
    v("seed", seed);
  }
};

// Softmax: see the ONNX operator documentation (opset 13).
struct Softmax {
  static constexpr OpKind kKind = OpKind::kSoftmax;
  int64_t axis = -1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// LogSoftmax: see the ONNX operator documentation (opset 13).
struct LogSoftmax {
  static constexpr OpKind kKind = OpKind::kLogSoftmax;
  int64_t axis = -1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// Hardmax: see the ONNX operator documentation (opset 13).
struct Hardmax {
  static constexpr OpKind kKind = OpKind::kHardmax;
  int64_t axis = -1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

}  // namespace kiln::compiler::ops
