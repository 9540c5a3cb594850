// SPDX-License-Identifier: Apache-2.0
// `kiln ops`: the ONNX ops kiln imports, with their opset ranges and kiln op families.
#include <fmt/format.h>

#include "compiler/onnx/importer.h"
#include "compiler/ops/op.h"
#include "tools/command.h"
#include "tools/json_writer.h"

namespace kiln::tools {

CommandAction add_ops_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("ops", "List the ONNX ops kiln imports and the opset versions it accepts");
  cmd->add_flag("--json", *json,
                "print one JSON object: each op's domain, name, first and last opset (null: "
                "open-ended) and kiln op family");
  return [json] {
    std::vector<compiler::SupportedOnnxOp> ops = compiler::supported_onnx_ops();
    auto family = [](const compiler::SupportedOnnxOp& op) {
      auto kind = compiler::parse_op_kind(op.op_type);
      return std::string(kind ? compiler::op_kind_family(*kind) : "");
    };
    // Importers whose range has no end take every later opset (last_version >= 1000).
    auto open_ended = [](const compiler::SupportedOnnxOp& op) { return op.last_version >= 1000; };
    if (*json) {
      JsonWriter j;
      j.begin_object().field("count", ops.size()).key("ops").begin_array();
      for (const auto& op : ops) {
        j.begin_object()
            .field("op", op.op_type)
            .field("domain", op.domain.empty() ? std::string("ai.onnx") : op.domain)
            .field("first_opset", op.first_version)
            .key("last_opset");
        if (open_ended(op)) {
          j.null();
        } else {
          j.value(op.last_version);
        }
        j.field("family", family(op)).end_object();
      }
      j.end_array().end_object();
      fmt::print("{}", j.str());
      return 0;
    }
    fmt::print("{:<28} {:<12} {:<14} {}\n", "op", "opsets", "family", "domain");
    for (const auto& op : ops) {
      fmt::print("{:<28} {:<12} {:<14} {}\n", op.op_type,
                 open_ended(op) ? fmt::format("{}+", op.first_version)
                                : fmt::format("{}-{}", op.first_version, op.last_version),
                 family(op), op.domain.empty() ? "ai.onnx" : op.domain);
    }
    fmt::print("{} ops\n", ops.size());
    return 0;
  };
}

}  // namespace kiln::tools
