// SPDX-License-Identifier: Apache-2.0
// The target list and the generic compile driver.
#include "compiler/targets/target.h"

#include <fmt/format.h>

#include "compiler/targets/ref/ref_target.h"

namespace kiln::compiler {

std::vector<std::string> target_names() { return {"ref"}; }

Result<std::unique_ptr<Target>> make_target(std::string_view name) {
  if (name == "ref") return make_ref_target();
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
