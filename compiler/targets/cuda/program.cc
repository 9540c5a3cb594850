// SPDX-License-Identifier: Apache-2.0
// Running a cuda Program: sessions (stream, handles, arena, pinned staging), constants uploaded
// once, inputs staged, steps queued or replayed as a CUDA graph, outputs copied back.
#include "compiler/targets/cuda/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>

#include "compiler/targets/cuda/kernels/rows.h"
#include "compiler/targets/ref/kernel.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {


}  // namespace

Status check_cuda(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status();
  cudaGetLastError();
  return unavailable_error(fmt::format("cuda target: {}: {}", what, cudaGetErrorString(err)));
}

Status check_cudnn(cudnnStatus_t status, std::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status();
  return unavailable_error(
      fmt::format("cuda target: cuDNN {}: {}", what, cudnnGetErrorString(status)));
}

Status check_cublas(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status();
  return unavailable_error(
      fmt::format("cuda target: cuBLASLt {}: status {}", what, static_cast<int>(status)));
}

// Inputs of at least this many bytes in page-locked memory are copied to the GPU from where they
// are; smaller ones are cheaper to stage than to look up.
constexpr size_t kDirectCopyBytes = 64 * 1024;

// ---- Session ----

std::shared_mutex& capture_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

Session::~Session() {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (graph != nullptr) cudaGraphExecDestroy(graph);
  if (cudnn != nullptr || lt != nullptr) {
    const std::unique_lock alone(capture_mutex());
    if (cudnn != nullptr) cudnnDestroy(cudnn);
    if (lt != nullptr) cublasLtDestroy(lt);
  }
  if (arena != nullptr) cudaFree(arena);
  if (workspace != nullptr) cudaFree(workspace);
  if (pinned != nullptr) cudaFreeHost(pinned);
  if (pinned_out != nullptr) cudaFreeHost(pinned_out);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

// ---- Program ----

Program::Program(std::vector<Buffer> buffers, std::vector<std::unique_ptr<Step>> steps,
                 std::vector<int> inputs, std::vector<int> outputs, MemoryPlan plan,
                 size_t workspace_bytes, size_t host_step_bytes, uint64_t seed)
    : PlannedProgram(std::move(buffers), std::move(steps), std::move(outputs), std::move(plan)),
      inputs_(std::move(inputs)),
      workspace_bytes_(workspace_bytes),
      seed_(seed) {
  size_t at = 0;
  for (int id : inputs_) {
    staging_.input_offsets.push_back(at);
    at += arena_align(buffers_[static_cast<size_t>(id)].bytes);
  }
  for (int id : outputs_) {
    staging_.output_offsets.push_back(staging_.output_bytes);
    staging_.output_bytes += arena_align(buffers_[static_cast<size_t>(id)].bytes);
  }
  staging_.host_step_offset = at;
  staging_.bytes = at + host_step_bytes;
  graphable_ = !env_flag_bool(EnvFlag::kCudaNoGraph);
  for (const auto& step : steps_) graphable_ = graphable_ && step->on_device;
}

Program::~Program() {
  if (constants_ != nullptr) cudaFree(constants_);
}

Status Program::upload_constants() {
  constant_offsets_.assign(buffers_.size(), 0);
  size_t at = 0;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].constant) continue;
    constant_offsets_[i] = at;
    at += arena_align(buffers_[i].bytes);
  }
  constant_bytes_ = at;
  if (at == 0) return Status();
  KILN_RETURN_IF_ERROR(
      check_cuda(cudaMalloc(&constants_, at), fmt::format("allocating {} bytes of constants", at)));
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (!b.constant || b.bytes == 0) continue;
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaMemcpy(static_cast<uint8_t*>(constants_) + constant_offsets_[i], b.host,
                              b.bytes, cudaMemcpyHostToDevice),
                   "uploading a constant"));
  }
  return Status();
}

Result<std::unique_ptr<Session>> Program::new_session() const {
  auto s = std::make_unique<Session>();
  KILN_RETURN_IF_ERROR(check_cuda(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                                  "creating a stream"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnCreate(&s->cudnn), "creating a handle"));
  KILN_RETURN_IF_ERROR(check_cudnn(cudnnSetStream(s->cudnn, s->stream), "setting the stream"));
  KILN_RETURN_IF_ERROR(check_cublas(cublasLtCreate(&s->lt), "creating a handle"));
  if (plan_.arena_bytes > 0) {
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaMalloc(&s->arena, plan_.arena_bytes),
                   fmt::format("allocating the {}-byte device arena", plan_.arena_bytes)));
  }
  if (workspace_bytes_ > 0) {
    KILN_RETURN_IF_ERROR(check_cuda(cudaMalloc(&s->workspace, workspace_bytes_),
                                    "allocating the cuDNN/cuBLASLt workspace"));
    s->workspace_bytes = workspace_bytes_;
  }
  if (staging_.bytes > 0) {
    void* p = nullptr;
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaMallocHost(&p, staging_.bytes),
                   fmt::format("allocating {} bytes of pinned host staging", staging_.bytes)));
    s->pinned = static_cast<uint8_t*>(p);
  }
  s->host_staging = staging_.host_step_offset;
  s->device.resize(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    s->device[i] = buffers_[i].constant ? static_cast<uint8_t*>(constants_) + constant_offsets_[i]
                                        : static_cast<uint8_t*>(s->arena) + plan_.offsets[i];
  }
  return s;
}

Status Program::copy_inputs(Session& session, const std::vector<const void*>& from) const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(inputs_[i])];
    if (b.bytes == 0) continue;
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaMemcpyAsync(session.device[static_cast<size_t>(inputs_[i])], from[i],
                                   b.bytes, cudaMemcpyDefault, session.stream),
                   "copying an input to the program's arena"));
  }
  return Status();
}

Status Program::copy_outputs(Session& session, const std::vector<void*>& to) const {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(outputs_[i])];
    if (b.bytes == 0) continue;
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaMemcpyAsync(to[i], session.device[static_cast<size_t>(outputs_[i])], b.bytes,
                                   cudaMemcpyDefault, session.stream),
                   "copying an output out of the program's arena"));
  }
  return Status();
}

Status Program::enqueue(Session& session, RunProfile* profile) const {
  for (const auto& step : steps_) {
    const auto start = std::chrono::steady_clock::now();
    Status s = step->run(session);
    if (!s.ok()) return s.with_context(step->node->describe());
    if (profile != nullptr) {
      KILN_RETURN_IF_ERROR(check_cuda(cudaStreamSynchronize(session.stream), step->kind));
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      profile->steps.push_back(
          {step->node->describe(), step->kind, ms.count(), step->on_device ? "cuda" : "ref"});
    }
  }
  return Status();
}

Status Program::capture(Session& session) const {
  const std::shared_lock capturing(capture_mutex());
  KILN_RETURN_IF_ERROR(
      check_cuda(cudaStreamBeginCapture(session.stream, cudaStreamCaptureModeThreadLocal),
                 "beginning a CUDA graph capture"));
  Status queued = enqueue(session, nullptr);
  cudaGraph_t graph = nullptr;
  Status ended = check_cuda(cudaStreamEndCapture(session.stream, &graph), "capturing a CUDA graph");
  if (queued.ok() && ended.ok()) {
    ended =
        check_cuda(cudaGraphInstantiate(&session.graph, graph, 0), "instantiating a CUDA graph");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  KILN_RETURN_IF_ERROR(queued);
  return ended;
}

Status Program::run_steps(Session& session, RunProfile* profile) const {
  if (profile != nullptr) profile->steps.clear();
  // Device-only programs replay one CUDA graph of their steps per session (captured on its first
  // run); programs with host steps, and profiled runs, queue their steps one by one.
  const bool use_graph = graphable_ && profile == nullptr && !session.graph_failed;
  if (use_graph && session.graph == nullptr) {
    // The capture starts on an idle stream (the input copies queued before it have finished).
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaStreamSynchronize(session.stream), "copying the inputs to the device"));
    Status captured = capture(session);
    if (!captured.ok()) {
      session.graph_failed = true;
      if (session.graph != nullptr) cudaGraphExecDestroy(session.graph);
      session.graph = nullptr;
      log(LogLevel::kWarning, "cuda target: running without a CUDA graph: {}",
          captured.to_string());
    }
  }
  if (use_graph && session.graph != nullptr) {
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaGraphLaunch(session.graph, session.stream), "launching the CUDA graph"));
  } else {
    session.interpreter = std::make_unique<ref::Interpreter>(seed_);
    KILN_RETURN_IF_ERROR(enqueue(session, profile));
  }
  return Status();
}

Status Program::run_device(Session& session, const std::vector<const void*>& inputs,
                           const std::vector<void*>& outputs) const {
  KILN_RETURN_IF_ERROR(copy_inputs(session, inputs));
  KILN_RETURN_IF_ERROR(run_steps(session, nullptr));
  KILN_RETURN_IF_ERROR(copy_outputs(session, outputs));
  return check_cuda(cudaStreamSynchronize(session.stream), "running the program");
}

// Whether `p` is page-locked host memory (cudaMallocHost, Executable::host_tensor): the GPU
// copies from it directly, so it needs no staging.
static bool page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

Status Program::stage_inputs(Session& session, const std::vector<Argument>& inputs) const {
  std::vector<const void*> staged_in(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(inputs_[i])];
    const void* from = inputs[i].tensor().raw_data();
    if (b.bytes >= kDirectCopyBytes && page_locked(from)) {
      staged_in[i] = from;
      continue;
    }
    staged_in[i] = session.pinned + staging_.input_offsets[i];
    if (b.bytes != 0) {
      std::memcpy(session.pinned + staging_.input_offsets[i], inputs[i].tensor().raw_data(),
                  b.bytes);
    }
  }
  return copy_inputs(session, staged_in);
}

Result<std::vector<OutputRange>> Program::run_ranges(Session& session,
                                                     const std::vector<Argument>& inputs) const {
  KILN_RETURN_IF_ERROR(stage_inputs(session, inputs));
  KILN_RETURN_IF_ERROR(run_steps(session, nullptr));
  void* scratch = nullptr;
  const size_t bytes = std::max<size_t>(1, outputs_.size()) * 2 * sizeof(int32_t);
  KILN_RETURN_IF_ERROR(check_cuda(cudaMallocAsync(&scratch, bytes, session.stream),
                                  "allocating the outputs' ranges"));
  auto* ordered = static_cast<int32_t*>(scratch);
  std::vector<OutputRange> ranges(outputs_.size());
  Status launched;
  for (size_t i = 0; i < outputs_.size() && launched.ok(); ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(outputs_[i])];
    const std::optional<Elem> e = b.dtype == DType::kF32    ? std::optional(Elem::kF32)
                                  : b.dtype == DType::kF16  ? std::optional(Elem::kF16)
                                  : b.dtype == DType::kBF16 ? std::optional(Elem::kBF16)
                                                            : std::nullopt;
    if (!e) continue;
    ranges[i].count = output_shapes_[i].numel();
    launched = launch_min_max(*e, session.device[static_cast<size_t>(outputs_[i])],
                              ranges[i].count, ordered + 2 * i, session.stream);
  }
  std::vector<int32_t> host(2 * outputs_.size());
  Status copied = launched.ok() ? check_cuda(cudaMemcpyAsync(host.data(), ordered,
                                                              host.size() * sizeof(int32_t),
                                                              cudaMemcpyDeviceToHost, session.stream),
                                              "copying the outputs' ranges")
                                : launched;
  const Status freed = check_cuda(cudaFreeAsync(scratch, session.stream), "freeing the ranges");
  KILN_RETURN_IF_ERROR(copied);
  KILN_RETURN_IF_ERROR(freed);
  KILN_RETURN_IF_ERROR(check_cuda(cudaStreamSynchronize(session.stream), "running the program"));
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (ranges[i].count == 0) continue;
    const float lo = ordered_to_float(host[2 * i]);
    const float hi = ordered_to_float(host[2 * i + 1]);
    // No value but NaNs: the range stays 0, as the host pass leaves it.
    if (lo <= hi) {
      ranges[i].min = lo;
      ranges[i].max = hi;
    }
  }
  return ranges;
}

Result<std::vector<Argument>> Program::run(Session& session, const std::vector<Argument>& inputs,
                                           RunProfile* profile) const {
  if (session.pinned_out == nullptr && staging_.output_bytes > 0) {
    void* p = nullptr;
    KILN_RETURN_IF_ERROR(check_cuda(
        cudaMallocHost(&p, staging_.output_bytes),
        fmt::format("allocating {} bytes of pinned host staging for the outputs",
                    staging_.output_bytes)));
    session.pinned_out = static_cast<uint8_t*>(p);
  }
  std::vector<void*> staged_out(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    staged_out[i] = session.pinned_out + staging_.output_offsets[i];
  }
  KILN_RETURN_IF_ERROR(stage_inputs(session, inputs));
  if (profile != nullptr) {
    // The input copies finish before the first step's clock starts: they are not its time.
    KILN_RETURN_IF_ERROR(
        check_cuda(cudaStreamSynchronize(session.stream), "copying the inputs to the device"));
  }
  KILN_RETURN_IF_ERROR(run_steps(session, profile));
  KILN_RETURN_IF_ERROR(copy_outputs(session, staged_out));
  KILN_RETURN_IF_ERROR(check_cuda(cudaStreamSynchronize(session.stream), "running the program"));
  std::vector<Argument> results;
  results.reserve(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(outputs_[i])];
    Result<Tensor> t = Tensor::allocate(b.dtype, output_shapes_[i]);
    if (!t.ok()) return t.status().with_context("cuda target: allocating an output");
    if (b.bytes != 0) {
      std::memcpy(t->raw_data(), session.pinned_out + staging_.output_offsets[i], b.bytes);
    }
    results.emplace_back(std::move(t).value());
  }
  return results;
}

int Program::device_steps() const {
  return static_cast<int>(
      std::count_if(steps_.begin(), steps_.end(), [](const auto& s) { return s->on_device; }));
}

}  // namespace kiln::compiler::cuda
