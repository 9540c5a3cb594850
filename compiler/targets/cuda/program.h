// SPDX-License-Identifier: Apache-2.0
// The cuda target's planned execution: device steps (cuDNN, cuBLASLt, own kernels) and host ref
// steps over buffers placed in one device arena by liveness, inputs and outputs staged through
// pinned host memory.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/memory_plan.h"
#include "compiler/runtime/plan.h"
#include "compiler/targets/ref/interpreter.h"
#include "compiler/targets/target.h"

namespace kiln::compiler::cuda {

// The alignment of every buffer in the device arena and in pinned staging.
inline constexpr size_t kArenaAlignment = 256;
inline size_t arena_align(size_t n) {
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// A failed CUDA runtime / cuDNN / cuBLAS call as a kUnavailable status naming `what`.
Status check_cuda(cudaError_t err, std::string_view what);
Status check_cudnn(cudnnStatus_t status, std::string_view what);
Status check_cublas(cublasStatus_t status, std::string_view what);

// Where a tensor lives on the device while the program runs (its type, size and liveness:
// PlannedBuffer).
struct Buffer : runtime::PlannedBuffer {
  // A constant lives in the program's constant block (uploaded once); `host` is its host copy.
  bool constant = false;
  const void* host = nullptr;
  std::shared_ptr<const std::vector<uint8_t>> owned;  // host data made at compile time
  // A 4-D tensor stored channels last (NHWC); `shape` stays the logical NCHW shape.
  bool nhwc = false;
  // An 8-bit activation of the int8 kernels (quantized.cc): s8 values `q - zero_point`, stored NHWC
  // when 4-D, `shape` [N, C', H, W] with C' >= C channels per pixel (the added ones zero).
  bool centered = false;
};

// CUDA graph captures hold it shared; destroying cuBLASLt and cuDNN handles, which synchronize
// the whole context, holds it alone. The driver can crash in that synchronization while another
// thread captures (cublasLtDestroy -> cuCtxSynchronize: 4 ONNX backend suite runs in 40 on an
// H200, each running tests on 16 threads), although captures run in thread-local mode.
std::shared_mutex& capture_mutex();

// The per-caller state: the arena, a stream, library handles, workspace and pinned staging. One
// session runs one call at a time.
struct Session {
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* arena = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  uint8_t* pinned = nullptr;  // inputs, then host-step staging
  size_t host_staging = 0;    // where host-step staging starts in `pinned`
  // The outputs' staging, allocated by the first run() that copies outputs to the host (runs
  // that keep them on the device, run_device and run_ranges, never pin gigabytes for them).
  uint8_t* pinned_out = nullptr;
  std::vector<void*> device;  // every buffer's device address
  std::unique_ptr<ref::Interpreter> interpreter;
  cudaGraphExec_t graph = nullptr;  // the captured run of a device-only program
  bool graph_failed = false;        // capture failed once: run step by step
};

// One unit of work queued on the session's stream.
class Step : public runtime::PlannedStep {
 public:
  virtual ~Step() = default;
  virtual Status run(Session& session) const = 0;

  bool on_device = true;
};

// A device step that runs a function over the session (its captured buffer ids index
// session.device): how the lowering rules (lowering.h) queue their kernels.
class FunctionStep final : public Step {
 public:
  using Fn = std::function<Status(Session&)>;
  FunctionStep(const Node& step_node, std::string step_kind, std::vector<int> in,
               std::vector<int> out, Fn fn)
      : fn_(std::move(fn)) {
    node = &step_node;
    kind = std::move(step_kind);
    reads = std::move(in);
    writes = std::move(out);
  }
  Status run(Session& session) const override { return fn_(session); }

 private:
  Fn fn_;
};

// A graph lowered to steps. Immutable once built; each run needs its own Session.
class Program : public runtime::PlannedProgram<Buffer, Step> {
 public:
  struct Staging {
    std::vector<size_t> input_offsets;
    std::vector<size_t> output_offsets;  // in Session::pinned_out
    size_t output_bytes = 0;
    size_t host_step_offset = 0;
    size_t bytes = 0;
  };
  Program(std::vector<Buffer> buffers, std::vector<std::unique_ptr<Step>> steps,
          std::vector<int> inputs, std::vector<int> outputs, MemoryPlan plan,
          size_t workspace_bytes, size_t host_step_bytes, uint64_t seed);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The shape of each graph output (an output may share a buffer of another shape).
  void set_output_shapes(std::vector<Shape> shapes) { output_shapes_ = std::move(shapes); }
  // Uploads the constants; called once by the builder.
  Status upload_constants();
  Result<std::unique_ptr<Session>> new_session() const;
  // Runs with inputs already checked against the graph; `profile` (optional) gets step times.
  Result<std::vector<Argument>> run(Session& session, const std::vector<Argument>& inputs,
                                    RunProfile* profile) const;
  // Runs as run() does, and gives each output's range (Executable::run_ranges), reduced on the
  // device: nothing but two numbers an output leaves the GPU.
  Result<std::vector<OutputRange>> run_ranges(Session& session,
                                              const std::vector<Argument>& inputs) const;
  // Runs on device-resident arguments (any pointer cudaMemcpyDefault takes), one per graph input
  // and output; returns when the outputs are written.
  Status run_device(Session& session, const std::vector<const void*>& inputs,
                    const std::vector<void*>& outputs) const;

  size_t constant_bytes() const { return constant_bytes_; }
  int device_steps() const;
  // Whether runs replay a CUDA graph: every step is on the device and KILN_CUDA_NO_GRAPH is unset.
  bool uses_graph() const { return graphable_; }

 private:
  // Copies host `inputs` through the session's pinned staging into the arena (queued).
  Status stage_inputs(Session& session, const std::vector<Argument>& inputs) const;
  // Queue copies into (out of) the arena's input (output) buffers on the session's stream.
  Status copy_inputs(Session& session, const std::vector<const void*>& from) const;
  Status copy_outputs(Session& session, const std::vector<void*>& to) const;
  // Queues the steps on the session's stream; run_steps replays the captured graph when it can.
  Status enqueue(Session& session, RunProfile* profile) const;
  Status run_steps(Session& session, RunProfile* profile) const;
  Status capture(Session& session) const;

  std::vector<int> inputs_;  // the buffer of each graph input
  std::vector<Shape> output_shapes_;
  size_t workspace_bytes_;
  Staging staging_;
  uint64_t seed_;
  bool graphable_ = false;
  void* constants_ = nullptr;  // device block of every constant buffer
  std::vector<size_t> constant_offsets_;
  size_t constant_bytes_ = 0;
};

}  // namespace kiln::compiler::cuda
