// SPDX-License-Identifier: Apache-2.0
// The target list and the generic compile driver.
#include "compiler/targets/target.h"

#include <fmt/format.h>

#include "compiler/targets/ref/ref_target.h"
#ifdef KILN_HAVE_DNNL
#include "compiler/targets/cpu/cpu_target.h"
#endif
#ifdef KILN_HAVE_CUDA_TARGET
#include "compiler/targets/cuda/cuda_target.h"
#include "core/gpu.h"
#endif

namespace kiln::compiler {

Status check_inputs(const Graph& graph, const std::vector<Argument>& inputs) {
  if (inputs.size() != graph.inputs().size()) {
    return invalid_argument_error(
        fmt::format("the model takes {} inputs, got {}", graph.inputs().size(), inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    const Argument& a = inputs[i];
    const ValueType& want = v->type();
    auto mismatch = [&] {
      return invalid_argument_error(fmt::format("input \"{}\": expected {}, got {}", v->name(),
                                                want.to_string(), a.to_string()));
    };
    if (want.kind() == ValueType::Kind::kOptional && a.is_none()) continue;
    const ValueType& inner = want.kind() == ValueType::Kind::kOptional ? want.element() : want;
    if (inner.is_tensor() != a.is_tensor()) return mismatch();
    if (!a.is_tensor()) continue;
    const TensorType& t = inner.tensor();
    if (t.dtype != a.tensor().dtype()) return mismatch();
    if (!t.has_rank()) continue;
    if (t.rank() != a.tensor().rank()) return mismatch();
    for (int d = 0; d < t.rank(); ++d) {
      const Dim& dim = (*t.dims)[static_cast<size_t>(d)];
      if (dim.known() && dim.value != a.tensor().shape()[d]) return mismatch();
    }
  }
  return Status();
}

std::vector<std::string> target_names() {
  std::vector<std::string> names = {"ref"};
#ifdef KILN_HAVE_DNNL
  names.push_back("cpu");
#endif
#ifdef KILN_HAVE_CUDA_TARGET
  // Listed only where it can run: built with CUDA and a GPU present (asked once per process).
  static const bool has_gpu = !list_gpus().empty();
  if (has_gpu) names.push_back("cuda");
#endif
  return names;
}

Result<std::unique_ptr<Target>> make_target(std::string_view name) {
  if (name == "ref") return make_ref_target();
#ifdef KILN_HAVE_DNNL
  if (name == "cpu") return make_cpu_target();
#endif
  if (name == "cuda") {
#ifdef KILN_HAVE_CUDA_TARGET
    return make_cuda_target();
#else
    return unavailable_error(
        "target cuda: this build has no CUDA support; rebuild where the CUDA toolkit (nvcc) and "
        "cuDNN 9 are installed (cmake -DKILN_CUDA=ON)");
#endif
  }
  std::string known;
  for (const std::string& n : target_names()) known += (known.empty() ? "" : ", ") + n;
  return not_found_error(fmt::format("unknown target \"{}\"; this build has: {}", name, known));
}

Result<std::shared_ptr<Executable>> compile(std::shared_ptr<Graph> graph, const Target& target,
                                            const CompileOptions& options) {
  if (options.optimize) {
    PassManager pm(target.passes(options));
    KILN_RETURN_IF_ERROR(pm.run(*graph));
  }
  for (const auto& node : graph->nodes()) {
    if (!target.supports(*node)) {
      return unimplemented_error(fmt::format("target {} does not support {}", target.name(), node->describe()));
    }
  }
  return target.finalize(std::move(graph), options);
}

}  // namespace kiln::compiler
