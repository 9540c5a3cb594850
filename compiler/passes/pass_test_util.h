// SPDX-License-Identifier: Apache-2.0
// What the pass tests share: run one pass and compare the printed IR before and after.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>

#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler::testing {

// Checks the graph prints as `before`, runs `pass` (and dead-code elimination when `then_dce`),
// and checks it prints as `after` and verifies. Returns whether the pass reported a change.
inline bool expect_rewrite(Graph& graph, Pass& pass, const std::string& before,
                           const std::string& after, bool then_dce = true) {
  EXPECT_EQ(print_graph(graph), before);
  Result<bool> changed = pass.run(graph);
  EXPECT_TRUE(changed.ok()) << changed.status().to_string();
  if (then_dce) {
    EXPECT_TRUE(make_dead_code_elimination()->run(graph).ok());
  }
  EXPECT_EQ(print_graph(graph), after);
  Status verified = verify_graph(graph);
  EXPECT_TRUE(verified.ok()) << verified.to_string();
  return changed.ok() && *changed;
}

// How many nodes of each op (constants left out) `g` holds, by op name.
inline std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const auto& node : g.nodes()) {
    if (node->kind() != OpKind::kConstant) ++counts[std::string(node->op().name())];
  }
  return counts;
}

inline TensorType f32(std::initializer_list<int64_t> dims) {
  return TensorType(DType::kF32, Shape(dims));
}

// A tensor of `shape` with elements uniform in [-1, 1), fixed by `seed`.
inline Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

}  // namespace kiln::compiler::testing
