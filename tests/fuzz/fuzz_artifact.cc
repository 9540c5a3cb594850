// SPDX-License-Identifier: Apache-2.0
// Fuzz target: .kiln artifacts of arbitrary bytes must give a Status, never crash or hang.
//
// Input starting with 'G' is a bare graph section (the rest) decoded against a zero weight
// section, so that mutations reach the graph decoder past the checksums; anything else is a
// whole artifact file, parsed, checked against this machine and decoded.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/graph_codec.h"
#include "core/logging.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::set_log_level(kiln::LogLevel::kOff);
  std::span<const uint8_t> bytes(data, size);
  if (size > 0 && data[0] == 'G') {
    static const std::vector<uint8_t> weights(1 << 16, 0);
    auto graph = kiln::compiler::decode_graph(bytes.subspan(1), weights, nullptr, "fuzz.kiln");
    (void)graph;
    return 0;
  }
  auto artifact = kiln::compiler::parse_artifact(bytes, nullptr, "fuzz.kiln");
  if (!artifact.ok()) return 0;
  kiln::Status compatible = artifact->check_compatible();
  (void)compatible;
  auto graph = artifact->graph();
  (void)graph;
  return 0;
}
