// SPDX-License-Identifier: Apache-2.0
// What pass tests that check values share: running a graph on the ref target.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "compiler/targets/target.h"

namespace kiln::compiler::testing {

// Runs `graph` as it is (no passes) on ref with `inputs`; the first output's elements, or none
// after a test failure.
inline std::vector<float> run_on_ref(std::shared_ptr<Graph> graph,
                                     const std::vector<Tensor>& inputs) {
  auto target = make_target("ref");
  EXPECT_TRUE(target.ok());
  if (!target.ok()) return {};
  CompileOptions options;
  options.optimize = false;
  auto exe = compile(std::move(graph), **target, options);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  std::vector<Argument> args;
  for (const Tensor& t : inputs) args.emplace_back(t);
  auto out = (*exe)->run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  auto span = (*out)[0].tensor().span<float>();
  return std::vector<float>(span.begin(), span.end());
}

}  // namespace kiln::compiler::testing
