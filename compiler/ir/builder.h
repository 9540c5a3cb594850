// SPDX-License-Identifier: Apache-2.0
// GraphBuilder: adds inputs, constants and nodes to a graph, inferring types as it goes.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler {

// Builds graphs in code (tests, the PyTorch bridge). Each node's types are inferred when it is
// added; the first failure is kept and returned by status(), and later calls still return values
// so that building code stays linear.
class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph) {}

  Value* input(std::string name, ValueType type) {
    return graph_.add_input(std::move(name), std::move(type));
  }
  Value* constant(Tensor value, std::string name = "");
  // Adds `op` with `num_outputs` outputs named "<name>" (one output) or "<name>_<i>".
  std::vector<Value*> add(Op op, std::vector<Value*> inputs, int num_outputs,
                          std::string name = "");
  // The single-output form.
  Value* add(Op op, std::vector<Value*> inputs, std::string name = "") {
    return add(std::move(op), std::move(inputs), 1, std::move(name))[0];
  }
  void output(Value* value) { graph_.add_output(value); }

  Graph& graph() { return graph_; }
  const Status& status() const { return status_; }

 private:
  Graph& graph_;
  Status status_;
};

}  // namespace kiln::compiler
