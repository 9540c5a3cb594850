// SPDX-License-Identifier: Apache-2.0
// `kiln devices`: the CPU and the GPUs kiln can compile for on this machine, and its targets.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thread>

#include "compiler/artifact/fingerprint.h"
#include "compiler/targets/target.h"
#include "core/gpu.h"
#include "tools/command.h"
#include "tools/json_writer.h"
#include "tools/target_option.h"

namespace kiln::tools {

CommandAction add_devices_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("devices", "List the CPU and GPUs kiln can use here");
  cmd->add_flag("--json", *json,
                "print one JSON object: the CPU (threads, ISA flags), the GPUs, the targets and "
                "the default one");
  return [json] {
    const unsigned threads = std::thread::hardware_concurrency();
    const std::vector<std::string> isa = compiler::cpu_isa_flags();
    std::string why;
    std::vector<GpuInfo> gpus = list_gpus(&why);
    const std::vector<std::string> targets = compiler::target_names();
    // The target a command without --target uses (KILN_TARGET's value is checked here too).
    Result<ResolvedTarget> fallback = resolve_target(TargetOption{});
    if (*json) {
      JsonWriter j;
      j.begin_object().key("cpu").begin_object().field("threads", threads).field("isa", isa);
      j.end_object().key("gpus").begin_array();
      for (const GpuInfo& g : gpus) {
        j.begin_object()
            .field("index", g.index)
            .field("name", g.name)
            .field("compute_capability", fmt::format("{}.{}", g.compute_major, g.compute_minor))
            .field("memory_bytes", g.memory_bytes)
            .field("multiprocessors", g.multiprocessors)
            .end_object();
      }
      j.end_array();
      if (gpus.empty()) j.field("no_gpu_reason", why);
      j.field("targets", targets);
      if (fallback.ok()) {
        j.field("default_target", fallback->name).field("default_target_from", fallback->source);
      } else {
        j.key("default_target")
            .null()
            .field("default_target_error", std::string(fallback.status().message()));
      }
      j.end_object();
      fmt::print("{}", j.str());
      return 0;
    }
    fmt::print("cpu: {} hardware threads ({})\n", threads, fmt::join(isa, ", "));
    if (gpus.empty()) fmt::print("gpu: none ({})\n", why);
    for (const GpuInfo& g : gpus) {
      fmt::print("gpu {}: {} (compute capability {}.{}, {:.1f} GiB, {} SMs)\n", g.index, g.name,
                 g.compute_major, g.compute_minor, static_cast<double>(g.memory_bytes) / (1 << 30),
                 g.multiprocessors);
    }
    fmt::print("targets: {}; default {}\n", fmt::join(targets, ", "),
               fallback.ok() ? fmt::format("{} ({})", fallback->name,
                                           fallback->source == "default" ? "KILN_TARGET is not set"
                                                                         : "from KILN_TARGET")
                             : std::string(fallback.status().message()));
    return 0;
  };
}

}  // namespace kiln::tools
