// SPDX-License-Identifier: Apache-2.0
// The pass manager: ordered runs, tracing and verification.
#include <fmt/format.h>

#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/pass.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler {

Status PassManager::run(Graph& graph) {
  const bool trace = env_flag_bool(EnvFlag::kTracePasses);
  for (const auto& pass : passes_) {
    Result<bool> changed = pass->run(graph);
    if (!changed.ok()) return changed.status().with_context(fmt::format("pass {}", pass->name()));
    if (trace) {
      log_unfiltered(LogLevel::kInfo,
                     fmt::format("after pass {} ({}):\n{}", pass->name(),
                                 *changed ? "changed" : "unchanged", print_graph(graph)));
    }
    if (verify_) {
      Status s = verify_graph(graph);
      if (!s.ok()) return s.with_context(fmt::format("the graph is broken after pass {}", pass->name()));
    }
  }
  return Status();
}

}  // namespace kiln::compiler
