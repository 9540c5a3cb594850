// SPDX-License-Identifier: Apache-2.0
// The activation functions of RNN, GRU and LSTM, resolved from the ops' string attributes.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::compiler {

enum class RnnActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

// One activation function with its alpha and beta.
struct RnnActivation {
  RnnActivationKind kind = RnnActivationKind::kTanh;
  float alpha = 0.0f;
  float beta = 0.0f;

  double operator()(double x) const;
};

// The activations of a recurrent op with `num_directions` directions, `defaults.size()` functions
// per direction: `names` empty (the defaults), one direction's list (used for both directions of
// a bidirectional op), or every direction's. Names match case-insensitively. Functions that take
// alpha/beta consume the next value of `alpha`/`beta` in order, else use the ONNX op's default.
// An unknown name or a wrong count is an invalid-argument error.
Result<std::vector<RnnActivation>> resolve_rnn_activations(
    const std::vector<std::string>& names, const std::optional<std::vector<float>>& alpha,
    const std::optional<std::vector<float>>& beta, std::span<const std::string_view> defaults,
    int num_directions);

}  // namespace kiln::compiler
