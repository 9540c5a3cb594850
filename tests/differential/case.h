// SPDX-License-Identifier: Apache-2.0
// Differential test cases: the patterns the cpu target specializes, each a seeded generator of
// small random ONNX models, and the case one seed gives.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "tests/differential/onnx_graph.h"

namespace kiln::differential {

// Builds one random model of a pattern into `g` (inputs, nodes, outputs), drawing every choice
// from g.rng().
using Generator = void (*)(OnnxGraph& g);

struct Pattern {
  std::string_view name;
  // What it covers: the ops and the cpu target's paths it is written to reach.
  std::string_view covers;
  Generator generate;
  // Its outputs come out of 8-bit arithmetic: they may differ from ref's by a step of their
  // quantization (Tolerance::quantum_steps).
  bool quantized = false;
};

// Every pattern, in a fixed order (tests/differential/patterns_*.cc).
std::span<const Pattern> patterns();
// The pattern called `name`, or nullptr.
const Pattern* find_pattern(std::string_view name);

// One generated model with its inputs.
struct Case {
  std::string pattern;
  uint64_t seed = 0;
  onnx::ModelProto model;
  std::vector<std::string> input_names;
  std::vector<Tensor> inputs;
  // Other values of the same shapes: each executable runs twice, on `inputs` and then on these.
  std::vector<Tensor> second_inputs;
};

// The case `seed` gives `pattern`: the same model and inputs for the same (pattern, seed).
Case make_case(const Pattern& pattern, uint64_t seed);

// Each file's patterns (patterns_*.cc), gathered by patterns().
std::span<const Pattern> conv_patterns();
std::span<const Pattern> fused_patterns();
std::span<const Pattern> tensor_patterns();
std::span<const Pattern> layout_patterns();
std::span<const Pattern> model_patterns();
std::span<const Pattern> quantized_patterns();
std::span<const Pattern> control_patterns();
std::span<const Pattern> rnn_patterns();

}  // namespace kiln::differential
