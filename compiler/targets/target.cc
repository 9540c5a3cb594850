// SPDX-License-Identifier: Apache-2.0
// The generic compile driver and the input check every target runs.
#include "compiler/targets/target.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace kiln::compiler {

Result<std::vector<OutputRange>> Executable::run_ranges(std::vector<Argument> inputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> outputs, run(std::move(inputs)));
  std::vector<OutputRange> ranges(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].is_tensor()) continue;
    const Tensor& t = outputs[o].tensor();
    visit_dtype(t.dtype(), [&]<class T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        OutputRange& r = ranges[o];
        bool any = false;
        for (const T& raw : t.span<T>()) {
          double v = 0;
          if constexpr (std::is_same_v<T, double>) {
            v = raw;
          } else {
            v = static_cast<double>(static_cast<float>(raw));
          }
          if (std::isnan(v)) continue;
          r.min = any ? std::min(r.min, v) : v;
          r.max = any ? std::max(r.max, v) : v;
          any = true;
        }
        r.count = t.numel();
      }
    });
  }
  return ranges;
}

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
