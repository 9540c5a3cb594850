// SPDX-License-Identifier: Apache-2.0
// `kiln devices`: the CPU and the GPUs kiln can compile for on this machine.
#include <fmt/format.h>

#include <thread>

#include "core/gpu.h"
#include "tools/command.h"

namespace kiln::tools {

CommandAction add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "List the CPU and GPUs kiln can use here");
  return [] {
    fmt::print("cpu: {} hardware threads\n", std::thread::hardware_concurrency());
    std::string why;
    std::vector<GpuInfo> gpus = list_gpus(&why);
    if (gpus.empty()) fmt::print("gpu: none ({})\n", why);
    for (const GpuInfo& g : gpus) {
      fmt::print("gpu {}: {} (compute capability {}.{}, {:.1f} GiB, {} SMs)\n", g.index, g.name,
                 g.compute_major, g.compute_minor, static_cast<double>(g.memory_bytes) / (1 << 30),
                 g.multiprocessors);
    }
    return 0;
  };
}

}  // namespace kiln::tools
