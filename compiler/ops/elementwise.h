// SPDX-License-Identifier: Apache-2.0
// The elementwise op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Abs: see the ONNX operator documentation (opset 13).
struct Abs {
  static constexpr OpKind kKind = OpKind::kAbs;
  template <class V>
  void reflect(V&) {}
};

// Acos: see the ONNX operator documentation (opset 7).
struct Acos {
  static constexpr OpKind kKind = OpKind::kAcos;
  template <class V>
  void reflect(V&) {}
};

// Acosh: see the ONNX operator documentation (opset 9).
struct Acosh {
  static constexpr OpKind kKind = OpKind::kAcosh;
  template <class V>
  void reflect(V&) {}
};

// Asin: see the ONNX operator documentation (opset 7).
struct Asin {
  static constexpr OpKind kKind = OpKind::kAsin;
  template <class V>
  void reflect(V&) {}
};

// Asinh: see the ONNX operator documentation (opset 9).
struct Asinh {
  static constexpr OpKind kKind = OpKind::kAsinh;
  template <class V>
  void reflect(V&) {}
};

// Atan: see the ONNX operator documentation (opset 7).
struct Atan {
  static constexpr OpKind kKind = OpKind::kAtan;
  template <class V>
  void reflect(V&) {}
};

// Atanh: see the ONNX operator documentation (opset 9).
struct Atanh {
  static constexpr OpKind kKind = OpKind::kAtanh;
  template <class V>
  void reflect(V&) {}
};

// Ceil: see the ONNX operator documentation (opset 13).
struct Ceil {
  static constexpr OpKind kKind = OpKind::kCeil;
  template <class V>
  void reflect(V&) {}
};

// Cos: see the ONNX operator documentation (opset 7).
struct Cos {
  static constexpr OpKind kKind = OpKind::kCos;
  template <class V>
  void reflect(V&) {}
};

// Cosh: see the ONNX operator documentation (opset 9).
struct Cosh {
  static constexpr OpKind kKind = OpKind::kCosh;
  template <class V>
  void reflect(V&) {}
};

// Erf: see the ONNX operator documentation (opset 13).
struct Erf {
  static constexpr OpKind kKind = OpKind::kErf;
  template <class V>
  void reflect(V&) {}
};

// Exp: see the ONNX operator documentation (opset 13).
struct Exp {
  static constexpr OpKind kKind = OpKind::kExp;
  template <class V>
  void reflect(V&) {}
};

// Floor: see the ONNX operator documentation (opset 13).
struct Floor {
  static constexpr OpKind kKind = OpKind::kFloor;
  template <class V>
  void reflect(V&) {}
};

// IsInf: see the ONNX operator documentation (opset 10).
struct IsInf {
  static constexpr OpKind kKind = OpKind::kIsInf;
  int64_t detect_negative = 1;
  int64_t detect_positive = 1;

  template <class V>
  void reflect(V& v) {
    v("detect_negative", detect_negative);
    v("detect_positive", detect_positive);
  }
};

// IsNaN: see the ONNX operator documentation (opset 13).
struct IsNaN {
  static constexpr OpKind kKind = OpKind::kIsNaN;
  template <class V>
  void reflect(V&) {}
};

// Log: see the ONNX operator documentation (opset 13).
struct Log {
  static constexpr OpKind kKind = OpKind::kLog;
  template <class V>
  void reflect(V&) {}
};

// Neg: see the ONNX operator documentation (opset 13).
struct Neg {
  static constexpr OpKind kKind = OpKind::kNeg;
  template <class V>
  void reflect(V&) {}
};

// Not: see the ONNX operator documentation (opset 1).
struct Not {
  static constexpr OpKind kKind = OpKind::kNot;
  template <class V>
  void reflect(V&) {}
};

// Reciprocal: see the ONNX operator documentation (opset 13).
struct Reciprocal {
  static constexpr OpKind kKind = OpKind::kReciprocal;
  template <class V>
  void reflect(V&) {}
};

// Relu: see the ONNX operator documentation (opset 14).
struct Relu {
  static constexpr OpKind kKind = OpKind::kRelu;
  template <class V>
  void reflect(V&) {}
};

// Round: see the ONNX operator documentation (opset 11).
struct Round {
  static constexpr OpKind kKind = OpKind::kRound;
  template <class V>
  void reflect(V&) {}
};

// Sigmoid: see the ONNX operator documentation (opset 13).
struct Sigmoid {
  static constexpr OpKind kKind = OpKind::kSigmoid;
  template <class V>
  void reflect(V&) {}
};

// Sign: see the ONNX operator documentation (opset 13).
struct Sign {
  static constexpr OpKind kKind = OpKind::kSign;
  template <class V>
  void reflect(V&) {}
};

// Sin: see the ONNX operator documentation (opset 7).
struct Sin {
  static constexpr OpKind kKind = OpKind::kSin;
  template <class V>
  void reflect(V&) {}
};

// Sinh: see the ONNX operator documentation (opset 9).
struct Sinh {
  static constexpr OpKind kKind = OpKind::kSinh;
  template <class V>
  void reflect(V&) {}
};

// Sqrt: see the ONNX operator documentation (opset 13).
struct Sqrt {
  static constexpr OpKind kKind = OpKind::kSqrt;
  template <class V>
  void reflect(V&) {}
};

// Tan: see the ONNX operator documentation (opset 7).
struct Tan {
  static constexpr OpKind kKind = OpKind::kTan;
  template <class V>
  void reflect(V&) {}
};

// Tanh: see the ONNX operator documentation (opset 13).
struct Tanh {
  static constexpr OpKind kKind = OpKind::kTanh;
  template <class V>
  void reflect(V&) {}
};

// Softplus: see the ONNX operator documentation (opset 1).
struct Softplus {
  static constexpr OpKind kKind = OpKind::kSoftplus;
  template <class V>
  void reflect(V&) {}
};

// Softsign: see the ONNX operator documentation (opset 1).
struct Softsign {
  static constexpr OpKind kKind = OpKind::kSoftsign;
  template <class V>
  void reflect(V&) {}
};

// Celu: see the ONNX operator documentation (opset 12).
struct Celu {
  static constexpr OpKind kKind = OpKind::kCelu;
  float alpha = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// Elu: see the ONNX operator documentation (opset 6).
struct Elu {
  static constexpr OpKind kKind = OpKind::kElu;
  float alpha = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// HardSigmoid: see the ONNX operator documentation (opset 6).
struct HardSigmoid {
  static constexpr OpKind kKind = OpKind::kHardSigmoid;
  float alpha = 0.200000003f;
  float beta = 0.5f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("beta", beta);
  }
};

// HardSwish: see the ONNX operator documentation (opset 14).
struct HardSwish {
  static constexpr OpKind kKind = OpKind::kHardSwish;
  template <class V>
  void reflect(V&) {}
};

// Gelu: see the ONNX operator documentation (opset 20).
struct Gelu {
  static constexpr OpKind kKind = OpKind::kGelu;
  std::string approximate = "none";  // "none": the erf form; "tanh": the tanh approximation

  template <class V>
  void reflect(V& v) {
    v("approximate", approximate);
  }
};

// Mish: see the ONNX operator documentation (opset 22).
struct Mish {
  static constexpr OpKind kKind = OpKind::kMish;
  template <class V>
  void reflect(V&) {}
};

// Swish: see the ONNX operator documentation (opset 24).
struct Swish {
  static constexpr OpKind kKind = OpKind::kSwish;
  float alpha = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// SwiGLU: see the ONNX operator documentation (opset 28). Swish(A) * B, A and B of one shape.
struct SwiGLU {
  static constexpr OpKind kKind = OpKind::kSwiGLU;
  float alpha = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// LeakyRelu: see the ONNX operator documentation (opset 16).
struct LeakyRelu {
  static constexpr OpKind kKind = OpKind::kLeakyRelu;
  float alpha = 0.00999999978f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// Selu: see the ONNX operator documentation (opset 6).
struct Selu {
  static constexpr OpKind kKind = OpKind::kSelu;
  float alpha = 1.67326319f;
  float gamma = 1.05070102f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("gamma", gamma);
  }
};

// Shrink: see the ONNX operator documentation (opset 9).
struct Shrink {
  static constexpr OpKind kKind = OpKind::kShrink;
  float bias = 0.0f;
  float lambd = 0.5f;

  template <class V>
  void reflect(V& v) {
    v("bias", bias);
    v("lambd", lambd);
  }
};

// ThresholdedRelu: see the ONNX operator documentation (opset 10).
struct ThresholdedRelu {
  static constexpr OpKind kKind = OpKind::kThresholdedRelu;
  float alpha = 1.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
  }
};

// Clip: see the ONNX operator documentation (opset 13).
struct Clip {
  static constexpr OpKind kKind = OpKind::kClip;
  template <class V>
  void reflect(V&) {}
};

// PRelu: see the ONNX operator documentation (opset 16).
struct PRelu {
  static constexpr OpKind kKind = OpKind::kPRelu;
  template <class V>
  void reflect(V&) {}
};

// Add: see the ONNX operator documentation (opset 14).
struct Add {
  static constexpr OpKind kKind = OpKind::kAdd;
  template <class V>
  void reflect(V&) {}
};

// Sub: see the ONNX operator documentation (opset 14).
struct Sub {
  static constexpr OpKind kKind = OpKind::kSub;
  template <class V>
  void reflect(V&) {}
};

// Mul: see the ONNX operator documentation (opset 14).
struct Mul {
  static constexpr OpKind kKind = OpKind::kMul;
  template <class V>
  void reflect(V&) {}
};

// Div: see the ONNX operator documentation (opset 14).
struct Div {
  static constexpr OpKind kKind = OpKind::kDiv;
  template <class V>
  void reflect(V&) {}
};

// Pow: see the ONNX operator documentation (opset 15).
struct Pow {
  static constexpr OpKind kKind = OpKind::kPow;
  template <class V>
  void reflect(V&) {}
};

// Mod: see the ONNX operator documentation (opset 13).
struct Mod {
  static constexpr OpKind kKind = OpKind::kMod;
  int64_t fmod = 0;

  template <class V>
  void reflect(V& v) {
    v("fmod", fmod);
  }
};

// And: see the ONNX operator documentation (opset 7).
struct And {
  static constexpr OpKind kKind = OpKind::kAnd;
  template <class V>
  void reflect(V&) {}
};

// Or: see the ONNX operator documentation (opset 7).
struct Or {
  static constexpr OpKind kKind = OpKind::kOr;
  template <class V>
  void reflect(V&) {}
};

// Xor: see the ONNX operator documentation (opset 7).
struct Xor {
  static constexpr OpKind kKind = OpKind::kXor;
  template <class V>
  void reflect(V&) {}
};

// Equal: see the ONNX operator documentation (opset 13).
struct Equal {
  static constexpr OpKind kKind = OpKind::kEqual;
  template <class V>
  void reflect(V&) {}
};

// Greater: see the ONNX operator documentation (opset 13).
struct Greater {
  static constexpr OpKind kKind = OpKind::kGreater;
  template <class V>
  void reflect(V&) {}
};

// GreaterOrEqual: see the ONNX operator documentation (opset 16).
struct GreaterOrEqual {
  static constexpr OpKind kKind = OpKind::kGreaterOrEqual;
  template <class V>
  void reflect(V&) {}
};

// Less: see the ONNX operator documentation (opset 13).
struct Less {
  static constexpr OpKind kKind = OpKind::kLess;
  template <class V>
  void reflect(V&) {}
};

// LessOrEqual: see the ONNX operator documentation (opset 16).
struct LessOrEqual {
  static constexpr OpKind kKind = OpKind::kLessOrEqual;
  template <class V>
  void reflect(V&) {}
};

// BitShift: see the ONNX operator documentation (opset 11).
struct BitShift {
  static constexpr OpKind kKind = OpKind::kBitShift;
  std::optional<std::string> direction;

  template <class V>
  void reflect(V& v) {
    v("direction", direction);
  }
};

// BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot: see the ONNX operator documentation (opset 18).
struct BitwiseAnd {
  static constexpr OpKind kKind = OpKind::kBitwiseAnd;
  template <class V>
  void reflect(V&) {}
};
struct BitwiseOr {
  static constexpr OpKind kKind = OpKind::kBitwiseOr;
  template <class V>
  void reflect(V&) {}
};
struct BitwiseXor {
  static constexpr OpKind kKind = OpKind::kBitwiseXor;
  template <class V>
  void reflect(V&) {}
};
struct BitwiseNot {
  static constexpr OpKind kKind = OpKind::kBitwiseNot;
  template <class V>
  void reflect(V&) {}
};

// Max: see the ONNX operator documentation (opset 13).
struct Max {
  static constexpr OpKind kKind = OpKind::kMax;
  template <class V>
  void reflect(V&) {}
};

// Min: see the ONNX operator documentation (opset 13).
struct Min {
  static constexpr OpKind kKind = OpKind::kMin;
  template <class V>
  void reflect(V&) {}
};

// Mean: see the ONNX operator documentation (opset 13).
struct Mean {
  static constexpr OpKind kKind = OpKind::kMean;
  template <class V>
  void reflect(V&) {}
};

// Sum: see the ONNX operator documentation (opset 13).
struct Sum {
  static constexpr OpKind kKind = OpKind::kSum;
  template <class V>
  void reflect(V&) {}
};

// Where: see the ONNX operator documentation (opset 16).
struct Where {
  static constexpr OpKind kKind = OpKind::kWhere;
  template <class V>
  void reflect(V&) {}
};

// Cast: see the ONNX operator documentation (opset 25). `saturate` (absent: 1) applies to the
// float8 types (out of range values become the largest finite value, else inf or NaN),
// `round_mode` ("up" when absent, "down" or "nearest") to float8e8m0.
struct Cast {
  static constexpr OpKind kKind = OpKind::kCast;
  std::optional<DType> to;
  std::optional<int64_t> saturate;
  std::optional<std::string> round_mode;

  template <class V>
  void reflect(V& v) {
    v("to", to);
    v("saturate", saturate);
    v("round_mode", round_mode);
  }
};

// CastLike: see the ONNX operator documentation (opset 25); `saturate` and `round_mode` as Cast's.
struct CastLike {
  static constexpr OpKind kKind = OpKind::kCastLike;
  std::optional<int64_t> saturate;
  std::optional<std::string> round_mode;

  template <class V>
  void reflect(V& v) {
    v("saturate", saturate);
    v("round_mode", round_mode);
  }
};

// Identity: see the ONNX operator documentation (opset 16).
struct Identity {
  static constexpr OpKind kKind = OpKind::kIdentity;
  template <class V>
  void reflect(V&) {}
};

// BitCast: see the ONNX operator documentation (opset 26). The bits of each element read as
// element type `to`, which has the same bit width (4- and 2-bit types too); not strings.
struct BitCast {
  static constexpr OpKind kKind = OpKind::kBitCast;
  std::optional<DType> to;

  template <class V>
  void reflect(V& v) {
    v("to", to);
  }
};

}  // namespace kiln::compiler::ops
