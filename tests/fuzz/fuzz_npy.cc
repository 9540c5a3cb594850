// SPDX-License-Identifier: Apache-2.0
// Fuzz target: .npy parsing of arbitrary bytes must return a Status, never crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = kiln::parse_npy(std::span<const uint8_t>(data, size), "fuzz.npy");
  if (tensor.ok()) {
    auto encoded = kiln::encode_npy(tensor->view());  // what parses must encode again
    (void)encoded;
  }
  return 0;
}
