// SPDX-License-Identifier: Apache-2.0
// For the ref kernels' tests: one op run on the ref interpreter over the given inputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler::test {

// Runs `op` on `inputs` (as graph inputs x0, x1, ...) on the ref interpreter; its first output.
inline Result<Tensor> run_one(Op op, const std::vector<Tensor>& inputs) {
  Graph g("t");
  GraphBuilder b(g);
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(
        b.input("x" + std::to_string(i), TensorType(inputs[i].dtype(), inputs[i].shape())));
  }
  b.output(b.add(std::move(op), values, "n"));
  KILN_RETURN_IF_ERROR(b.status());
  std::vector<Argument> args(inputs.begin(), inputs.end());
  ref::Interpreter interpreter;
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> out, interpreter.run(g, std::move(args)));
  return out[0].tensor();
}

}  // namespace kiln::compiler::test
