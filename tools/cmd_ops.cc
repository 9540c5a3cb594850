// SPDX-License-Identifier: Apache-2.0
// `kiln ops`: the ONNX ops kiln imports, with their opset ranges and kiln op families.
#include <fmt/format.h>

#include "compiler/onnx/importer.h"
#include "compiler/ops/op.h"
#include "tools/command.h"

namespace kiln::tools {

CommandAction add_ops_command(CLI::App& app) {
  app.add_subcommand("ops", "List the ONNX ops kiln imports and the opset versions it accepts");
  return [] {
    std::vector<compiler::SupportedOnnxOp> ops = compiler::supported_onnx_ops();
    fmt::print("{:<28} {:<12} {:<14} {}\n", "op", "opsets", "family", "domain");
    for (const auto& op : ops) {
      auto kind = compiler::parse_op_kind(op.op_type);
      fmt::print("{:<28} {:<12} {:<14} {}\n", op.op_type,
                 op.last_version >= 1000 ? fmt::format("{}+", op.first_version)
                                         : fmt::format("{}-{}", op.first_version, op.last_version),
                 kind ? compiler::op_kind_family(*kind) : "",
                 op.domain.empty() ? "ai.onnx" : op.domain);
    }
    fmt::print("{} ops\n", ops.size());
    return 0;
  };
}

}  // namespace kiln::tools
