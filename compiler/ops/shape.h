// SPDX-License-Identifier: Apache-2.0
// The shape op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Reshape: see the ONNX operator documentation (opset 14).
struct Reshape {
  static constexpr OpKind kKind = OpKind::kReshape;
  int64_t allowzero = 0;

  template <class V>
  void reflect(V& v) {
    v("allowzero", allowzero);
  }
};

// Flatten: see the ONNX operator documentation (opset 13).
struct Flatten {
  static constexpr OpKind kKind = OpKind::kFlatten;
  int64_t axis = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// Squeeze: see the ONNX operator documentation (opset 13).
struct Squeeze {
  static constexpr OpKind kKind = OpKind::kSqueeze;
  template <class V>
  void reflect(V&) {}
};

// Unsqueeze: see the ONNX operator documentation (opset 13).
struct Unsqueeze {
  static constexpr OpKind kKind = OpKind::kUnsqueeze;
  template <class V>
  void reflect(V&) {}
};

// Transpose: see the ONNX operator documentation (opset 13).
struct Transpose {
  static constexpr OpKind kKind = OpKind::kTranspose;
  std::optional<std::vector<int64_t>> perm;

  template <class V>
  void reflect(V& v) {
    v("perm", perm);
  }
};

// Concat: see the ONNX operator documentation (opset 13).
struct Concat {
  static constexpr OpKind kKind = OpKind::kConcat;
  std::optional<int64_t> axis;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
  }
};

// Split: see the ONNX operator documentation (opset 13).
// Without split sizes (input 1), num_outputs (opset 18) splits into parts of ceil(dim / n), the
// last one smaller; without either, the axis splits evenly among the outputs.
struct Split {
  static constexpr OpKind kKind = OpKind::kSplit;
  int64_t axis = 0;
  std::optional<int64_t> num_outputs;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("num_outputs", num_outputs);
  }
};

// Slice: see the ONNX operator documentation (opset 13).
struct Slice {
  static constexpr OpKind kKind = OpKind::kSlice;
  template <class V>
  void reflect(V&) {}
};

// Tile: see the ONNX operator documentation (opset 13).
struct Tile {
  static constexpr OpKind kKind = OpKind::kTile;
  template <class V>
  void reflect(V&) {}
};

// Expand: see the ONNX operator documentation (opset 13).
struct Expand {
  static constexpr OpKind kKind = OpKind::kExpand;
  template <class V>
  void reflect(V&) {}
};

// Pad: see the ONNX operator documentation (opset 13).
struct Pad {
  static constexpr OpKind kKind = OpKind::kPad;
  std::string mode = "constant";

  template <class V>
  void reflect(V& v) {
    v("mode", mode);
  }
};

// Shape: see the ONNX operator documentation (opset 15).
struct Shape {
  static constexpr OpKind kKind = OpKind::kShape;
  std::optional<int64_t> end;
  int64_t start = 0;

  template <class V>
  void reflect(V& v) {
    v("end", end);
    v("start", start);
  }
};

// Size: see the ONNX operator documentation (opset 13).
struct Size {
  static constexpr OpKind kKind = OpKind::kSize;
  template <class V>
  void reflect(V&) {}
};

// DepthToSpace: see the ONNX operator documentation (opset 13).
struct DepthToSpace {
  static constexpr OpKind kKind = OpKind::kDepthToSpace;
  std::optional<int64_t> blocksize;
  std::string mode = "DCR";

  template <class V>
  void reflect(V& v) {
    v("blocksize", blocksize);
    v("mode", mode);
  }
};

// SpaceToDepth: see the ONNX operator documentation (opset 13).
struct SpaceToDepth {
  static constexpr OpKind kKind = OpKind::kSpaceToDepth;
  std::optional<int64_t> blocksize;
  std::string mode = "DCR";  // the channel of (b1, b2, c): (b1*b + b2)*C + c; CRD: c*b*b + b1*b + b2

  template <class V>
  void reflect(V& v) {
    v("blocksize", blocksize);
    v("mode", mode);
  }
};

// Constant: see the ONNX operator documentation (opset 13).
struct Constant {
  static constexpr OpKind kKind = OpKind::kConstant;
  Tensor value;
  std::optional<float> value_float;
  std::optional<std::vector<float>> value_floats;
  std::optional<int64_t> value_int;
  std::optional<std::vector<int64_t>> value_ints;
  std::optional<std::string> value_string;
  std::vector<std::string> value_strings;

  template <class V>
  void reflect(V& v) {
    v("value", value);
    v("value_float", value_float);
    v("value_floats", value_floats);
    v("value_int", value_int);
    v("value_ints", value_ints);
    v("value_string", value_string);
    v("value_strings", value_strings);
  }
};

// ConstantOfShape: see the ONNX operator documentation (opset 9).
struct ConstantOfShape {
  static constexpr OpKind kKind = OpKind::kConstantOfShape;
  Tensor value;

  template <class V>
  void reflect(V& v) {
    v("value", value);
  }
};

// Range: see the ONNX operator documentation (opset 11).
struct Range {
  static constexpr OpKind kKind = OpKind::kRange;
  template <class V>
  void reflect(V&) {}
};

// EyeLike: see the ONNX operator documentation (opset 9).
struct EyeLike {
  static constexpr OpKind kKind = OpKind::kEyeLike;
  std::optional<DType> dtype;
  int64_t k = 0;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
    v("k", k);
  }
};

// Trilu: see the ONNX operator documentation (opset 14).
struct Trilu {
  static constexpr OpKind kKind = OpKind::kTrilu;
  int64_t upper = 1;

  template <class V>
  void reflect(V& v) {
    v("upper", upper);
  }
};

}  // namespace kiln::compiler::ops
