// SPDX-License-Identifier: Apache-2.0
// The building blocks the differential patterns share: convolutions with random geometry and
// weights scaled to keep values near 1, activations as ONNX exporters write them, and the like.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/differential/onnx_graph.h"

namespace kiln::differential {

// A Conv's geometry; empty vectors mean the ONNX defaults. `pads` is [begin..., end...].
struct ConvSpec {
  int64_t out = 16;
  Dims kernel = {3, 3};
  Dims strides;
  Dims dilations;
  Dims pads;
  std::string auto_pad;  // empty: NOTSET
  int64_t group = 1;
  bool bias = true;
};

// Conv(x) with weights uniform in +-sqrt(3 / fan_in) and a bias in +-0.5 (when spec.bias).
std::string conv(OnnxGraph& g, const std::string& x, const ConvSpec& spec);

// A random geometry for a Conv over `in_dims` (N, C, spatial...) with `out` outputs and kernels
// up to `max_kernel`: strides, dilations, asymmetric pads or auto_pad, every output dim >= 1.
ConvSpec random_conv_spec(Rng& rng, const Dims& in_dims, int64_t out, int64_t max_kernel = 5);

// The eltwise activations exporters write after a Conv or MatMul.
enum class Act {
  kNone,
  kRelu,
  kLeakyRelu,
  kRelu6,      // Clip(0, 6) with min/max inputs
  kClipRange,  // Clip with bounds: constants (one of them sometimes omitted) or graph inputs
  kSigmoid,
  kTanh,
  kHardSwish,
  kHardSigmoid,
  kSiLU,      // x * Sigmoid(x), the Mul's operands in either order
  kHardSiLU,  // x * HardSigmoid(x)
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt 2)), as exporters write it
  kGeluTanh,  // the tanh approximation, as exporters write it
  kElu,
  kScale,  // Mul by a scalar constant, or Div by one
  kExp,
  kAbs,
};
std::string activation(OnnxGraph& g, const std::string& x, Act act);
// One of the activations above (kNone among them), weighted towards the common ones.
Act random_act(Rng& rng);

// A pick from the channel counts the patterns use: odd, prime, below and past multiples of 16.
int64_t odd_channels(Rng& rng);
// A multiple of 16 in [16, max].
int64_t channels16(Rng& rng, int64_t max);

// Makes `name` a graph output with chance `p`: an intermediate value that a fused step computes
// on the way must still come out right when it is also read from outside.
void maybe_output(OnnxGraph& g, const std::string& name, double p);

}  // namespace kiln::differential
