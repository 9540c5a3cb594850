// SPDX-License-Identifier: Apache-2.0
// Recurrent activation functions: names, defaults and evaluation.
#include "compiler/ops/rnn_activation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace kiln::compiler {

namespace {

struct ActivationInfo {
  std::string_view name;  // lower-case
  RnnActivationKind kind;
  int num_params;  // 0, 1 (alpha) or 2 (alpha, beta)
  float alpha;
  float beta;
};

constexpr ActivationInfo kActivations[] = {
    {"relu", RnnActivationKind::kRelu, 0, 0.0f, 0.0f},
    {"tanh", RnnActivationKind::kTanh, 0, 0.0f, 0.0f},
    {"sigmoid", RnnActivationKind::kSigmoid, 0, 0.0f, 0.0f},
    {"affine", RnnActivationKind::kAffine, 2, 1.0f, 0.0f},
    {"leakyrelu", RnnActivationKind::kLeakyRelu, 1, 0.01f, 0.0f},
    {"thresholdedrelu", RnnActivationKind::kThresholdedRelu, 1, 1.0f, 0.0f},
    {"scaledtanh", RnnActivationKind::kScaledTanh, 2, 1.0f, 1.0f},
    {"hardsigmoid", RnnActivationKind::kHardSigmoid, 2, 0.2f, 0.5f},
    {"elu", RnnActivationKind::kElu, 1, 1.0f, 0.0f},
    {"softsign", RnnActivationKind::kSoftsign, 0, 0.0f, 0.0f},
    {"softplus", RnnActivationKind::kSoftplus, 0, 0.0f, 0.0f},
};

}  // namespace

double RnnActivation::operator()(double x) const {
  const double a = alpha;
  const double b = beta;
  switch (kind) {
    case RnnActivationKind::kRelu: return std::max(x, 0.0);
    case RnnActivationKind::kTanh: return std::tanh(x);
    case RnnActivationKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case RnnActivationKind::kAffine: return a * x + b;
    case RnnActivationKind::kLeakyRelu: return x >= 0.0 ? x : a * x;
    case RnnActivationKind::kThresholdedRelu: return x > a ? x : 0.0;
    case RnnActivationKind::kScaledTanh: return a * std::tanh(b * x);
    case RnnActivationKind::kHardSigmoid: return std::clamp(a * x + b, 0.0, 1.0);
    case RnnActivationKind::kElu: return x >= 0.0 ? x : a * (std::exp(x) - 1.0);
    case RnnActivationKind::kSoftsign: return x / (1.0 + std::abs(x));
    case RnnActivationKind::kSoftplus: return std::log1p(std::exp(x));
  }
  return x;
}

Result<std::vector<RnnActivation>> resolve_rnn_activations(
    const std::vector<std::string>& names, const std::optional<std::vector<float>>& alpha,
    const std::optional<std::vector<float>>& beta, std::span<const std::string_view> defaults,
    int num_directions) {
  const size_t per_direction = defaults.size();
  std::vector<std::string> all;
  if (names.empty()) {
    all.assign(defaults.begin(), defaults.end());
  } else if (names.size() == per_direction * static_cast<size_t>(num_directions) ||
             names.size() == per_direction) {
    all = names;
  } else {
    return invalid_argument_error(fmt::format("expected {} activations, got {}",
                                              per_direction * static_cast<size_t>(num_directions),
                                              names.size()));
  }
  size_t next_alpha = 0;
  size_t next_beta = 0;
  std::vector<RnnActivation> out;
  for (const std::string& name : all) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& a : kActivations) {
      if (a.name == lower) info = &a;
    }
    if (info == nullptr) {
      return invalid_argument_error(fmt::format("unknown activation function \"{}\"", name));
    }
    RnnActivation act{info->kind, info->alpha, info->beta};
    if (info->num_params >= 1 && alpha && next_alpha < alpha->size())
      act.alpha = (*alpha)[next_alpha++];
    if (info->num_params >= 2 && beta && next_beta < beta->size()) act.beta = (*beta)[next_beta++];
    out.push_back(act);
  }
  // One direction's list serves both directions.
  while (out.size() < per_direction * static_cast<size_t>(num_directions)) {
    out.push_back(out[out.size() - per_direction]);
  }
  return out;
}

}  // namespace kiln::compiler
