// SPDX-License-Identifier: Apache-2.0
// Argument printing.
#include "compiler/ir/argument.h"

#include <fmt/format.h>

namespace kiln::compiler {

std::string Argument::to_string() const {
  switch (kind_) {
    case Kind::kNone: return "none";
    case Kind::kTensor:
      return fmt::format("{}{}", dtype_name(tensor_.dtype()), tensor_.shape().to_string());
    case Kind::kSequence: return fmt::format("seq({})", sequence_.size());
  }
  return "?";
}

}  // namespace kiln::compiler
