// SPDX-License-Identifier: Apache-2.0
// The standard pipeline's order, in one visible list.
#include "compiler/passes/passes.h"

namespace kiln::compiler {

std::vector<std::unique_ptr<Pass>> standard_passes() {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_algebraic_simplification());
  passes.push_back(make_constant_folding());
  passes.push_back(make_if_folding());
  passes.push_back(make_batchnorm_folding());
  passes.push_back(make_common_subexpression_elimination());
  passes.push_back(make_hard_swish_fusion());
  passes.push_back(make_algebraic_simplification());
  passes.push_back(make_dead_code_elimination());
  return passes;
}

}  // namespace kiln::compiler
