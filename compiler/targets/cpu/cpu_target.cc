// SPDX-License-Identifier: Apache-2.0
// The cpu target: standard passes plus fusion; at finalize every node oneDNN can run gets a
// primitive built for its static shapes, and the rest run their ref kernels.
//
// This first slice keeps tensors in plain (row-major) layouts between nodes; blocked layouts
// kept across regions, with reorders only at region edges, come later.
#include "compiler/targets/cpu/cpu_target.h"

#include <fmt/format.h>

#include "compiler/passes/passes.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "compiler/targets/ref/interpreter.h"
#include "core/logging.h"

namespace kiln::compiler {

namespace {

// The oneDNN kernel for `node`, or nullptr to run its ref kernel.
std::unique_ptr<ref::NodeKernel> make_kernel(const Node& node, const dnnl::engine& engine) {
  switch (node.kind()) {
    case OpKind::kConv: return cpu::make_conv_kernel(node, engine);
    case OpKind::kMatMul: return cpu::make_matmul_kernel(node, engine);
    case OpKind::kGemm: return cpu::make_gemm_kernel(node, engine);
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool: return cpu::make_pool_kernel(node, engine);
    case OpKind::kRelu: return cpu::make_eltwise_kernel(node, engine);
    case OpKind::kAdd:
    case OpKind::kMul: return cpu::make_binary_kernel(node, engine);
    default: return nullptr;
  }
}

// Kernels for the nodes of `graph` and of its subgraphs.
void add_kernels(const Graph& graph, const dnnl::engine& engine, ref::KernelTable& table) {
  for (const auto& node : graph.nodes()) {
    for (const Graph* sub : node->op().subgraphs()) add_kernels(*sub, engine, table);
    if (std::unique_ptr<ref::NodeKernel> kernel = make_kernel(*node, engine)) {
      table.emplace(node.get(), std::move(kernel));
    }
  }
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::shared_ptr<Graph> graph, uint64_t seed, dnnl::engine engine,
                ref::KernelTable kernels)
      : graph_(std::move(graph)),
        seed_(seed),
        engine_(std::move(engine)),
        kernels_(std::move(kernels)) {}

  std::string_view target() const override { return "cpu"; }
  const Graph& graph() const override { return *graph_; }
  Result<std::vector<Argument>> run(std::vector<Argument> inputs) const override {
    KILN_RETURN_IF_ERROR(check_inputs(*graph_, inputs));
    ref::Interpreter interpreter(seed_, &kernels_);
    return interpreter.run(*graph_, std::move(inputs));
  }
  int dnnl_node_count() const { return static_cast<int>(kernels_.size()); }

 private:
  std::shared_ptr<Graph> graph_;
  uint64_t seed_;
  dnnl::engine engine_;
  ref::KernelTable kernels_;
};

class CpuTarget final : public Target {
 public:
  std::string_view name() const override { return "cpu"; }
  bool supports(const Node&) const override { return true; }
  std::vector<std::unique_ptr<Pass>> passes(const CompileOptions&) const override {
    std::vector<std::unique_ptr<Pass>> passes = standard_passes();
    passes.push_back(make_conv_activation_fusion());
    return passes;
  }
  Result<std::shared_ptr<Executable>> finalize(std::shared_ptr<Graph> graph,
                                               const CompileOptions& options) const override {
    dnnl::engine engine;
    try {
      engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      return internal_error(fmt::format("cpu target: oneDNN has no CPU engine: {}", e.what()));
    }
    ref::KernelTable kernels;
    add_kernels(*graph, engine, kernels);
    if (log_enabled(LogLevel::kDebug)) {
      std::string nodes;
      for (const auto& node : graph->nodes()) {
        if (kernels.count(node.get()) != 0) nodes += (nodes.empty() ? "" : ", ") + node->describe();
      }
      log(LogLevel::kDebug, "cpu target: {} of {} nodes run on oneDNN: {}", kernels.size(),
          graph->num_nodes(), nodes);
    }
    return std::shared_ptr<Executable>(std::make_shared<CpuExecutable>(
        std::move(graph), options.seed, std::move(engine), std::move(kernels)));
  }
};

}  // namespace

std::unique_ptr<Target> make_cpu_target() {
  return std::make_unique<CpuTarget>();
}

int cpu_dnnl_node_count(const Executable& executable) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&executable);
  return cpu != nullptr ? cpu->dnnl_node_count() : -1;
}

}  // namespace kiln::compiler
