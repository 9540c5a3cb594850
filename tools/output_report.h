// SPDX-License-Identifier: Apache-2.0
// How `kiln run` reports outputs: a classifier's top classes (--top) and each output as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/argument.h"
#include "core/tensor.h"
#include "tools/json_writer.h"

namespace kiln::tools {

struct ClassScore {
  int64_t index = 0;  // the position along the last dim: the class
  double score = 0;
};

// The `k` largest values of each row (the last dim) of a numeric tensor, largest first (ties: the
// lower index first); one list per row. Empty for strings, scalars and a last dim below 2.
std::vector<std::vector<ClassScore>> top_classes(const Tensor& t, int k);

// "logits: class 7 (score 12.3)" for one row and k = 1; "logits: classes 7 (12.3), 1 (2.5)" for
// more; rows of a batch as "logits[1]: ...". One line per row.
std::string top_classes_text(const std::string& name,
                             const std::vector<std::vector<ClassScore>>& rows);

// Outputs of more elements than this are reported without their values (write them with
// --output-dir).
inline constexpr int64_t kMaxJsonValues = 4096;

// {"name", "dtype", "shape", "values" (flat, row-major; null past kMaxJsonValues), "top" (with
// top > 0: per row, [{"class", "score"}...])} for a tensor; {"name", "value"} with the text of
// anything else.
void output_json(JsonWriter& j, const std::string& name, const compiler::Argument& value, int top);

}  // namespace kiln::tools
