// SPDX-License-Identifier: Apache-2.0
// The cuda target's tuning choices (cuDNN convolution algorithms, cuBLASLt matmul algorithms), kept
// in an artifact's "cuda.tuning" section with the fingerprint of the GPU and libraries they were
// measured on, so loading on the same setup reuses them instead of timing again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::compiler::cuda {

inline constexpr const char* kTuningSection = "cuda.tuning";

struct Tuning {
  // What the choices depend on: GPU name and compute capability, driver, CUDA runtime, cuDNN and
  // cuBLASLt versions (gpu_fingerprint()).
  std::string fingerprint;
  // One entry per problem (a key naming the op, its shapes, types and attributes): the choice.
  std::map<std::string, std::vector<uint8_t>> choices;

  std::vector<uint8_t> encode() const;
  // A malformed section is a data-loss error naming it.
  static Result<Tuning> decode(std::span<const uint8_t> bytes);
};

// This process's GPU (the current device) and library versions, as one line.
std::string gpu_fingerprint();

// The fixed-size record of a choice: `T` as bytes and back.
template <class T>
std::vector<uint8_t> choice_bytes(const T& value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  return std::vector<uint8_t>(p, p + sizeof(T));
}
template <class T>
std::optional<T> choice_value(const std::vector<uint8_t>& bytes) {
  if (bytes.size() != sizeof(T)) return std::nullopt;
  T value;
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(&value));
  return value;
}

// Progress of a compile's tuning, reported through core/progress.h's sink as "cuda: tuning" (the
// CLI draws it) once something is measured: a load with stored choices stays quiet.
class TuningProgress {
 public:
  explicit TuningProgress(int total);
  ~TuningProgress();
  TuningProgress(const TuningProgress&) = delete;
  TuningProgress& operator=(const TuningProgress&) = delete;
  // One node's choice made; `measured` when it was timed now.
  void step(bool measured);

 private:
  int total_;
  int done_ = 0;
  bool draw_;
  bool measured_ = false;
};

}  // namespace kiln::compiler::cuda
