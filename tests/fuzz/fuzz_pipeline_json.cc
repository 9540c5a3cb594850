// SPDX-License-Identifier: Apache-2.0
// Fuzz target: pipeline JSON (kiln's and rocAL's) on arbitrary text must return a Status, never
// crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline/json/pipeline_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = kiln::pipeline::parse_pipeline_json(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  (void)spec;
  return 0;
}
