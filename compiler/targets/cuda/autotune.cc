// SPDX-License-Identifier: Apache-2.0
// Timing tuning candidates as replayed CUDA graphs (autotune.h).
#include "compiler/targets/cuda/autotune.h"

#include <cmath>
#include <shared_mutex>

#include "compiler/targets/cuda/program.h"

namespace kiln::compiler::cuda {

namespace {

// Milliseconds of one replay of a CUDA graph of what `queue` queues on `s.stream` (after a warm-up
// replay), or infinity when it cannot be captured or run: GPU time only, as when the program
// replays its own graph. (Timing the calls as queued measured cuDNN's host overhead at batch 1:
// ResNet-50 f16 on an H200 then got FMA kernels 5-18 times slower on the GPU, 2.3 ms a run
// against 0.36 ms.)
float replay_ms(Scratch& s, const std::function<bool()>& queue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  float ms = INFINITY;
  std::shared_lock capturing(capture_mutex());
  if (cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    const bool queued = queue();
    const bool captured = cudaStreamEndCapture(s.stream, &graph) == cudaSuccess && queued;
    float t = 0;
    if (captured && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
        cudaGraphLaunch(exec, s.stream) == cudaSuccess &&
        cudaEventRecord(s.events[0], s.stream) == cudaSuccess &&
        cudaGraphLaunch(exec, s.stream) == cudaSuccess &&
        cudaEventRecord(s.events[1], s.stream) == cudaSuccess &&
        cudaEventSynchronize(s.events[1]) == cudaSuccess &&
        cudaEventElapsedTime(&t, s.events[0], s.events[1]) == cudaSuccess) {
      ms = t;
    }
  }
  capturing.unlock();
  cudaStreamSynchronize(s.stream);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  return ms;
}

}  // namespace

float candidate_ms(Scratch& s, const std::function<bool()>& once) {
  if (!once() || cudaStreamSynchronize(s.stream) != cudaSuccess) {
    cudaGetLastError();
    return INFINITY;
  }
  return replay_ms(s, [&] {
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) ok = once();
    return ok;
  });
}

}  // namespace kiln::compiler::cuda
