// SPDX-License-Identifier: Apache-2.0
// Einsum equations: parsing into per-dim labels, shared by inference and kernels.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::compiler {

// A parsed Einsum equation for inputs of known ranks. Each dim gets a label: 0-51 for the letters
// (A-Z then a-z, so label order is ASCII order), 52 + j for the j-th dim an ellipsis stands for.
// Ellipsis dims are right-aligned across inputs, so they broadcast like numpy's leading dims.
struct EinsumEquation {
  static constexpr int kNumLetters = 52;
  std::vector<std::vector<int>> inputs;  // per input, the label of each dim
  std::vector<int> output;               // the label of each output dim (all distinct)
  int num_labels = kNumLetters;          // kNumLetters + the widest ellipsis
};

// Parses `equation` (spaces ignored; implicit output when there is no "->": the ellipsis dims,
// then the letters used once, in ASCII order). Fails with a message naming the problem when the
// equation is malformed or does not match the ranks.
Result<EinsumEquation> parse_einsum(std::string_view equation, const std::vector<int>& ranks);

}  // namespace kiln::compiler
