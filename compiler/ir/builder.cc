// SPDX-License-Identifier: Apache-2.0
// GraphBuilder.
#include "compiler/ir/builder.h"

#include <fmt/format.h>

#include "compiler/ops/infer.h"

namespace kiln::compiler {

Value* GraphBuilder::constant(Tensor value, std::string name) {
  if (name.empty()) name = graph_.unique_name("const");
  return graph_.add_constant(std::move(value), std::move(name));
}

std::vector<Value*> GraphBuilder::add(Op op, std::vector<Value*> inputs, int num_outputs,
                                      std::string name) {
  Node* node = graph_.add_node(std::move(op), std::move(inputs), num_outputs, name);
  if (!name.empty()) {
    for (int i = 0; i < num_outputs; ++i) {
      node->output(i)->set_name(num_outputs == 1 ? name : fmt::format("{}_{}", name, i));
    }
  }
  Status s = infer_node(*node);
  if (status_.ok() && !s.ok()) status_ = s;
  return node->outputs();
}

}  // namespace kiln::compiler
