// SPDX-License-Identifier: Apache-2.0
// Model: an imported network — its main graph plus where it came from.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "compiler/ir/graph.h"

namespace kiln::compiler {

struct Model {
  std::unique_ptr<Graph> graph;
  // The default-domain opset the model was written against.
  int64_t opset = 0;
  // Opsets of the other domains it imports ("ai.onnx.ml", "com.microsoft", ...).
  std::map<std::string, int64_t> domain_opsets;
  std::string producer;
  // Where it was read from (empty for in-memory models).
  std::string source_path;
};

}  // namespace kiln::compiler
