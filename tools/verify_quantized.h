// SPDX-License-Identifier: Apache-2.0
// `kiln verify --fp16|--bf16|--int8`: a quantized model against its fp32 original over a folder
// of inputs — cosine similarity, max errors, top-1 agreement and, with labels, accuracy.
#pragma once

#include <string>
#include <vector>

#include "tools/quantize_flags.h"

namespace kiln::tools {

struct VerifyQuantizedOptions {
  std::string model;   // the .onnx model
  std::string target;  // both programs run here
  std::vector<std::string> input_shapes;
  QuantizeFlags quantize;
  std::string inputs;    // --inputs DIR
  std::string pipeline;  // --pipeline P.json for image folders
  std::string labels;    // --labels FILE
  bool json = false;
  double min_top1 = 0;    // percent; below it the command fails
  double min_cosine = 0;  // below it the command fails
  // --per-layer (int8): each quantized Conv/MatMul/Gemm kept in float alone, with the same
  // calibration, and how much closer to fp32 that brings the first output: the layers that cost
  // accuracy, most first.
  bool per_layer = false;
};

// Runs the comparison and prints a table (or one line of JSON); returns the exit code.
int verify_quantized(const VerifyQuantizedOptions& options);

}  // namespace kiln::tools
