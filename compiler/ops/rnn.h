// SPDX-License-Identifier: Apache-2.0
// The rnn op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// RNN: see the ONNX operator documentation (opset 14).
struct RNN {
  static constexpr OpKind kKind = OpKind::kRNN;
  static constexpr int kGates = 1;  // per direction, in W, R and B
  static constexpr std::string_view kDefaultActivations[] = {"Tanh"};
  std::optional<std::vector<float>> activation_alpha;
  std::optional<std::vector<float>> activation_beta;
  std::vector<std::string> activations;
  std::optional<float> clip;
  std::string direction = "forward";
  std::optional<int64_t> hidden_size;
  int64_t layout = 0;

  template <class V>
  void reflect(V& v) {
    v("activation_alpha", activation_alpha);
    v("activation_beta", activation_beta);
    v("activations", activations);
    v("clip", clip);
    v("direction", direction);
    v("hidden_size", hidden_size);
    v("layout", layout);
  }
};

// GRU: see the ONNX operator documentation (opset 14).
struct GRU {
  static constexpr OpKind kKind = OpKind::kGRU;
  static constexpr int kGates = 3;  // z, r, h
  static constexpr std::string_view kDefaultActivations[] = {"Sigmoid", "Tanh"};
  std::optional<std::vector<float>> activation_alpha;
  std::optional<std::vector<float>> activation_beta;
  std::vector<std::string> activations;
  std::optional<float> clip;
  std::string direction = "forward";
  std::optional<int64_t> hidden_size;
  int64_t layout = 0;
  int64_t linear_before_reset = 0;

  template <class V>
  void reflect(V& v) {
    v("activation_alpha", activation_alpha);
    v("activation_beta", activation_beta);
    v("activations", activations);
    v("clip", clip);
    v("direction", direction);
    v("hidden_size", hidden_size);
    v("layout", layout);
    v("linear_before_reset", linear_before_reset);
  }
};

// LSTM: see the ONNX operator documentation (opset 14).
struct LSTM {
  static constexpr OpKind kKind = OpKind::kLSTM;
  static constexpr int kGates = 4;  // i, o, f, c
  static constexpr std::string_view kDefaultActivations[] = {"Sigmoid", "Tanh", "Tanh"};
  std::optional<std::vector<float>> activation_alpha;
  std::optional<std::vector<float>> activation_beta;
  std::vector<std::string> activations;
  std::optional<float> clip;
  std::string direction = "forward";
  std::optional<int64_t> hidden_size;
  int64_t input_forget = 0;
  int64_t layout = 0;

  template <class V>
  void reflect(V& v) {
    v("activation_alpha", activation_alpha);
    v("activation_beta", activation_beta);
    v("activations", activations);
    v("clip", clip);
    v("direction", direction);
    v("hidden_size", hidden_size);
    v("input_forget", input_forget);
    v("layout", layout);
  }
};

}  // namespace kiln::compiler::ops
