// SPDX-License-Identifier: Apache-2.0
// The ref target: no optimizations beyond the generic clean-ups, the interpreter as the executable.
#include "compiler/targets/ref/ref_target.h"

#include "compiler/passes/passes.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {

namespace {

class RefExecutable final : public Executable {
 public:
  RefExecutable(std::shared_ptr<Graph> graph, uint64_t seed) : graph_(std::move(graph)), seed_(seed) {}

  std::string_view target() const override { return "ref"; }
  const Graph& graph() const override { return *graph_; }
  Result<std::vector<Argument>> run(std::vector<Argument> inputs) const override {
    KILN_RETURN_IF_ERROR(check_inputs(*graph_, inputs));
    ref::Interpreter interpreter(seed_);
    return interpreter.run(*graph_, std::move(inputs));
  }

 private:
  std::shared_ptr<Graph> graph_;
  uint64_t seed_;
};

class RefTarget final : public Target {
 public:
  std::string_view name() const override { return "ref"; }
  bool supports(const Node&) const override { return true; }
  std::vector<std::unique_ptr<Pass>> passes(const CompileOptions&) const override {
    return standard_passes();
  }
  Result<std::shared_ptr<Executable>> finalize(std::shared_ptr<Graph> graph,
                                               const CompileOptions& options) const override {
    return std::shared_ptr<Executable>(std::make_shared<RefExecutable>(std::move(graph), options.seed));
  }
};

}  // namespace

std::unique_ptr<Target> make_ref_target() { return std::make_unique<RefTarget>(); }

}  // namespace kiln::compiler
