// SPDX-License-Identifier: Apache-2.0
// GPU gauges (utilization, memory, power) read through NVML, which is loaded at run time
// (dlopen of libnvidia-ml.so.1): kiln builds and runs without it, and then has no GPU gauges.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::server {

// One GPU's gauges at one moment; a gauge the driver does not report is empty.
struct GpuSample {
  std::string uuid;                   // "GPU-..." (the label Triton's series carry)
  std::optional<double> utilization;  // busy fraction of the last sample period, 0..1
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<double> power_watts;
};

// Where GPU samples come from (NvmlReader on a machine with NVIDIA's driver).
class GpuReader {
 public:
  virtual ~GpuReader() = default;
  // Every GPU's gauges now; a GPU whose handle cannot be had is left out.
  virtual std::vector<GpuSample> read() const = 0;
};

class NvmlReader final : public GpuReader {
 public:
  // Loads `library` and initialises NVML. Not found naming the library when it cannot be loaded
  // (no NVIDIA driver), unavailable with NVML's reason when a function is missing or nvmlInit
  // fails. Thread-safe once open (NVML is).
  static Result<std::unique_ptr<NvmlReader>> open(const std::string& library = "libnvidia-ml.so.1");
  // nvmlShutdown and dlclose.
  ~NvmlReader() override;
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  std::vector<GpuSample> read() const override;

  struct Api;

 private:
  explicit NvmlReader(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace kiln::server
