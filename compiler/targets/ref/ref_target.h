// SPDX-License-Identifier: Apache-2.0
// The ref target: the executable specification every other target is tested against.
#pragma once

#include <memory>

#include "compiler/targets/target.h"

namespace kiln::compiler {

std::unique_ptr<Target> make_ref_target();

}  // namespace kiln::compiler
