// SPDX-License-Identifier: Apache-2.0
// Pass and PassManager: a target's optimization pipeline is one visible list of small passes.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/status.h"

namespace kiln::compiler {

// One graph rewrite. run() returns whether it changed the graph. Passes are deterministic: the
// same graph in gives the same graph out.
class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual Result<bool> run(Graph& graph) = 0;
};

// Runs passes in order. With KILN_TRACE_PASSES=1 it logs the IR after each pass; in debug builds
// (and when `verify` is set) it verifies the graph after each pass and fails naming the pass.
class PassManager {
 public:
  PassManager() = default;
  explicit PassManager(std::vector<std::unique_ptr<Pass>> passes) : passes_(std::move(passes)) {}

  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  void set_verify(bool verify) { verify_ = verify; }

  Status run(Graph& graph);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
#ifdef NDEBUG
  bool verify_ = false;
#else
  bool verify_ = true;
#endif
};

}  // namespace kiln::compiler
