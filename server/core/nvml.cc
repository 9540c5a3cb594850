// SPDX-License-Identifier: Apache-2.0
// NVML through dlopen: the few functions kiln calls, declared here from NVIDIA's documented
// signatures (nvml.h is not needed to build).
#include "server/core/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <type_traits>

namespace kiln::server {

namespace {

// NVML's types as its ABI has them: nvmlReturn_t is an enum (0 is NVML_SUCCESS), a device is
// an opaque pointer, and the structs below are nvmlUtilization_t and nvmlMemory_t (v1).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of the sample period a kernel ran
  unsigned int memory;  // percent of it memory was read or written
};
struct NvmlMemory {
  unsigned long long total;  // NOLINT(google-runtime-int): NVML's own type
  unsigned long long free;   // NOLINT(google-runtime-int)
  unsigned long long used;   // NOLINT(google-runtime-int)
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned int kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

}  // namespace

struct NvmlReader::Api {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*device_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;  // milliwatts
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int) = nullptr;
  bool initialised = false;

  ~Api() {
    if (initialised) shutdown();
    if (library != nullptr) dlclose(library);
  }
};

Result<std::unique_ptr<NvmlReader>> NvmlReader::open(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) {
    const char* why = dlerror();
    return not_found_error(fmt::format("NVML ({}) is not available: {}; no GPU gauges", library,
                                       why ? why : "dlopen failed"));
  }
  Status missing;
  auto find = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api->library, name));
    if (fn == nullptr && missing.ok()) {
      missing = unavailable_error(fmt::format("NVML ({}) has no {}; no GPU gauges", library, name));
    }
  };
  find(api->init, "nvmlInit_v2");
  find(api->shutdown, "nvmlShutdown");
  find(api->error_string, "nvmlErrorString");
  find(api->device_count, "nvmlDeviceGetCount_v2");
  find(api->device_by_index, "nvmlDeviceGetHandleByIndex_v2");
  find(api->utilization, "nvmlDeviceGetUtilizationRates");
  find(api->memory, "nvmlDeviceGetMemoryInfo");
  find(api->power, "nvmlDeviceGetPowerUsage");
  find(api->uuid, "nvmlDeviceGetUUID");
  KILN_RETURN_IF_ERROR(missing);
  const NvmlReturn r = api->init();
  if (r != kNvmlSuccess) {
    return unavailable_error(
        fmt::format("nvmlInit failed: {}; no GPU gauges", api->error_string(r)));
  }
  api->initialised = true;
  return std::unique_ptr<NvmlReader>(new NvmlReader(std::move(api)));
}

NvmlReader::NvmlReader(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlReader::~NvmlReader() = default;

std::vector<GpuSample> NvmlReader::read() const {
  std::vector<GpuSample> out;
  unsigned int count = 0;
  if (api_->device_count(&count) != kNvmlSuccess) return out;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (api_->device_by_index(i, &device) != kNvmlSuccess) continue;
    GpuSample s;
    char uuid[kUuidBufferSize] = {};
    if (api_->uuid(device, uuid, kUuidBufferSize) == kNvmlSuccess) {
      s.uuid = uuid;
    } else {
      s.uuid = fmt::format("index-{}", i);
    }
    NvmlUtilization utilization{};
    if (api_->utilization(device, &utilization) == kNvmlSuccess) {
      s.utilization = utilization.gpu / 100.0;
    }
    NvmlMemory memory{};
    if (api_->memory(device, &memory) == kNvmlSuccess) {
      s.memory_total_bytes = memory.total;
      s.memory_used_bytes = memory.used;
    }
    unsigned int milliwatts = 0;
    if (api_->power(device, &milliwatts) == kNvmlSuccess) s.power_watts = milliwatts / 1000.0;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kiln::server
