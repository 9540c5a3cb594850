// SPDX-License-Identifier: Apache-2.0
// Thread counts for intra-op parallelism.
#pragma once

namespace kiln::compiler {

// The machine's physical cores (hyper-threads of one core count once), from
// /sys/devices/system/cpu; the logical CPU count when the topology cannot be read. At least 1.
int physical_core_count();

}  // namespace kiln::compiler
