// SPDX-License-Identifier: Apache-2.0
// The generic passes every target starts from, one file each in passes/.
#pragma once

#include <memory>
#include <vector>

#include "compiler/passes/pass.h"

namespace kiln::compiler {

std::unique_ptr<Pass> make_dead_code_elimination();

// The target-independent clean-up pipeline, in order.
std::vector<std::unique_ptr<Pass>> standard_passes();

}  // namespace kiln::compiler
