// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the model config parsers (config.toml, and Triton's config.pbtxt) on arbitrary
// text must return a Status, never crash. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/core/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto config = kiln::server::parse_model_config(text, "fuzz/config.toml");
    (void)config;
  } else {
    auto config = kiln::server::parse_model_config_pbtxt(text, "fuzz/config.pbtxt");
    (void)config;
  }
  return 0;
}
