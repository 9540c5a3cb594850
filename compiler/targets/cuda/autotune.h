// SPDX-License-Identifier: Apache-2.0
// Timing tuning candidates on the GPU (cuDNN and cuBLASLt algorithms, cuDNN engines, the own
// kernels' configurations) the way the program runs them: as a replayed CUDA graph, GPU time only.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace kiln::compiler::cuda {

// Device memory, a stream and its two timing events for measuring candidates, freed on scope exit.
struct Scratch {
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* p : blocks) cudaFree(p);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  // `bytes` of device memory with every byte `fill` (by default a small non-zero pattern, 0x3c:
  // about 0.0115 in f32, 1.06 in f16, 0.0115 in bf16), or nullptr when the GPU has too little
  // free.
  void* block(size_t bytes, int fill = 0x3c) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    blocks.push_back(p);
    cudaMemset(p, fill, bytes);
    return p;
  }
  std::vector<void*> blocks;
  std::vector<cudaEvent_t> events;
  cudaStream_t stream = nullptr;
};

// The GPU time in milliseconds of a candidate: one trial call of `once` (which queues its work on
// `s.stream` and says whether it was accepted), then three calls replayed as one CUDA graph (the
// time of the three); infinity when the trial fails or the calls cannot be captured. `s` needs
// its stream and two events.
float candidate_ms(Scratch& s, const std::function<bool()>& once);

}  // namespace kiln::compiler::cuda
