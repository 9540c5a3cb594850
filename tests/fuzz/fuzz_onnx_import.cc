// SPDX-License-Identifier: Apache-2.0
// Fuzz target: ONNX import of arbitrary bytes must return a Status, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <span>

#include "compiler/onnx/importer.h"
#include "core/logging.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::set_log_level(kiln::LogLevel::kOff);
  auto model =
      kiln::compiler::import_onnx_bytes(std::span<const uint8_t>(data, size), {}, "fuzz.onnx");
  (void)model;
  return 0;
}
