// SPDX-License-Identifier: Apache-2.0
// The pattern table and the case one (pattern, seed) gives.
#include "tests/differential/case.h"

#include <vector>

namespace kiln::differential {

std::span<const Pattern> patterns() {
  static const std::vector<Pattern> all = [] {
    std::vector<Pattern> v;
    for (std::span<const Pattern> family :
         {conv_patterns(), fused_patterns(), tensor_patterns(), layout_patterns(), model_patterns(),
          quantized_patterns(), control_patterns(), rnn_patterns()}) {
      v.insert(v.end(), family.begin(), family.end());
    }
    return v;
  }();
  return all;
}

const Pattern* find_pattern(std::string_view name) {
  for (const Pattern& p : patterns()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Case make_case(const Pattern& pattern, uint64_t seed) {
  // The pattern's name goes into the seed, so that seed s of two patterns draws differently.
  uint64_t mixed = 0xcbf29ce484222325ULL;
  for (char c : pattern.name) mixed = (mixed ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  Rng rng(mixed ^ (seed * 0x9e3779b97f4a7c15ULL));
  OnnxGraph g(rng, /*opset=*/17);
  pattern.generate(g);
  Case c;
  c.pattern = std::string(pattern.name);
  c.seed = seed;
  c.model = g.model();
  c.input_names = g.input_names();
  c.inputs = g.input_values();
  c.second_inputs = g.second_input_values();
  return c;
}

}  // namespace kiln::differential
