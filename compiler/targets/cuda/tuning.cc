// SPDX-License-Identifier: Apache-2.0
// Encoding of the cuda target's tuning section, the GPU fingerprint and the tuning progress.
#include "compiler/targets/cuda/tuning.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <cstring>

#include "core/progress.h"

namespace kiln::compiler::cuda {

namespace {

constexpr char kMagic[4] = {'K', 'C', 'T', '1'};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>& out, const void* data, size_t n) {
  put_u32(out, static_cast<uint32_t>(n));
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

// Reads little-endian fields, failing (not crashing) past the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool u32(uint32_t& v) {
    if (bytes_.size() - at_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{bytes_[at_ + static_cast<size_t>(i)]} << (8 * i);
    at_ += 4;
    return true;
  }
  bool bytes(std::vector<uint8_t>& out) {
    uint32_t n = 0;
    if (!u32(n) || bytes_.size() - at_ < n) return false;
    out.assign(bytes_.begin() + static_cast<std::ptrdiff_t>(at_),
               bytes_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> Tuning::encode() const {
  std::vector<uint8_t> out(kMagic, kMagic + 4);
  put_bytes(out, fingerprint.data(), fingerprint.size());
  put_u32(out, static_cast<uint32_t>(choices.size()));
  for (const auto& [key, value] : choices) {
    put_bytes(out, key.data(), key.size());
    put_bytes(out, value.data(), value.size());
  }
  return out;
}

Result<Tuning> Tuning::decode(std::span<const uint8_t> bytes) {
  auto bad = [](std::string_view why) {
    return data_loss_error(fmt::format("section {}: {}", kTuningSection, why));
  };
  if (bytes.size() < 4 || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return bad("not a tuning record (bad magic)");
  }
  Reader r(bytes.subspan(4));
  Tuning t;
  std::vector<uint8_t> field;
  if (!r.bytes(field)) return bad("truncated fingerprint");
  t.fingerprint.assign(field.begin(), field.end());
  uint32_t count = 0;
  if (!r.u32(count)) return bad("truncated count");
  for (uint32_t i = 0; i < count; ++i) {
    std::vector<uint8_t> key;
    std::vector<uint8_t> value;
    if (!r.bytes(key) || !r.bytes(value)) return bad(fmt::format("truncated entry {}", i));
    t.choices.emplace(std::string(key.begin(), key.end()), std::move(value));
  }
  if (!r.done()) return bad("bytes after the last entry");
  return t;
}

std::string gpu_fingerprint() {
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  return fmt::format("{}; sm_{}{}; driver {}; cudart {}; cudnn {}; cublasLt {}", prop.name,
                     prop.major, prop.minor, driver, runtime, cudnnGetVersion(),
                     cublasLtGetVersion());
}

TuningProgress::TuningProgress(int total) : total_(total), draw_(total > 0) {}

TuningProgress::~TuningProgress() {
  if (draw_ && measured_ && done_ < total_) report_progress("cuda: tuning", total_, total_);
}

void TuningProgress::step(bool measured) {
  ++done_;
  measured_ = measured_ || measured;
  if (draw_ && measured_ && done_ <= total_) report_progress("cuda: tuning", done_, total_);
}

}  // namespace kiln::compiler::cuda
