// SPDX-License-Identifier: Apache-2.0
// The ONNX backend runner's float64 judge: where a target's f16 or bf16 output misses the test
// data, both are measured against the model's float64 reference, and the closer one is right.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/argument.h"
#include "compiler/targets/target.h"
#include "core/status.h"
#include "core/tensor.h"

namespace kiln::onnx_backend {

// How far the data may be from float64, in ulps of the output's type, for the judge to decide:
// beyond it the data and kiln's float64 reference (which is kiln's own reading of the op) differ by
// more than rounding, which float64 cannot judge. The ONNX 1.23 suite's f16/bf16 data is within
// 1.21 ulps of float64 (`onnx_backend_runner --f64-report`).
inline constexpr double kDataUlpLimit = 4.0;

// One ulp of `dtype` at the float64 value `reference`, as the judge counts it: 2^-10 |reference|
// for f16, 2^-7 |reference| for bf16 (the spacing just above a power of two), never less than the
// type's smallest subnormal. 0 for any other type: the judge decides f16 and bf16 outputs only.
double judge_ulp(DType dtype, double reference);

// The judge's verdict on one output.
struct Judgement {
  bool passed = false;
  double data_ulps = 0;    // the largest |data - float64| over the elements, in ulps
  double target_ulps = 0;  // the largest |target - float64|
  std::string reason;      // why it failed
};

// Judges `target` (f16 or bf16), which missed `data` (the same type and shape), against `f64` (the
// float64 reference, f64, the same shape). It passes when the data is within kDataUlpLimit ulps of
// float64 everywhere and, at every element, the target is within one ulp of float64 or at least as
// close to it as the data is. NaN matches NaN, an infinity the same infinity. Fails on another type
// (f32 keeps the usual tolerance against the data), or on mismatched types or shapes, saying so.
Judgement judge_against_f64(const Tensor& data, const Tensor& target, const Tensor& f64);

// The same over an output that is a tensor or a sequence of tensors: every tensor is judged, the
// figures are the largest, the reason is the first failure's (naming the sequence element).
Judgement judge_against_f64(const compiler::Argument& data, const compiler::Argument& target,
                            const compiler::Argument& f64);

// The float64 reference of the ONNX model at `model_path`: imported, converted with
// compiler::convert_to_f64, compiled for `ref` (the ref target) and run on `inputs`. Fails with
// the step that failed ("float64 reference: compile: ...").
Result<std::vector<compiler::Argument>> float64_reference(const std::string& model_path,
                                                          const compiler::Target& ref,
                                                          std::vector<compiler::Argument> inputs);

}  // namespace kiln::onnx_backend
