// SPDX-License-Identifier: Apache-2.0
// Physical core counting from the Linux CPU topology.
#include "compiler/runtime/threads.h"

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace kiln::compiler {

int physical_core_count() {
  std::set<std::pair<int, int>> cores;  // (package, core)
  const unsigned logical = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package_file(dir + "physical_package_id");
    std::ifstream core_file(dir + "core_id");
    int package = 0;
    int core = 0;
    if (!(package_file >> package) || !(core_file >> core)) return static_cast<int>(logical);
    cores.emplace(package, core);
  }
  return cores.empty() ? static_cast<int>(logical) : static_cast<int>(cores.size());
}

}  // namespace kiln::compiler
