// SPDX-License-Identifier: Apache-2.0
// Building a cuda Program (buffers, host ref steps, the memory plan, constants) and running it.
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

constexpr size_t kAlignment = 256;

size_t align_up(size_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

using runtime::byte_size;
using runtime::RefSlot;

// A node run by its ref kernel on the host: inputs copied out of the arena into pinned staging,
// outputs copied back in.
class HostStep final : public Step {
 public:
  struct Slot : RefSlot {
    const void* host = nullptr;  // a constant's host data (no copy needed)
    size_t offset = 0;           // in the session's host-step staging
  };
  HostStep(const Node& node, std::vector<Slot> inputs, std::vector<Slot> outputs)
      : inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        ref_inputs_(inputs_.begin(), inputs_.end()),
        ref_outputs_(outputs_.begin(), outputs_.end()) {
    this->node = &node;
    kind = std::string(node.op().name());
    on_device = false;
  }

  Status run(Session& session) const override {
    uint8_t* host = session.pinned + session.host_staging;
    for (const Slot& s : inputs_) {
      if (s.buffer < 0 || s.host != nullptr || s.bytes == 0) continue;
      KILN_RETURN_IF_ERROR(
          check_cuda(cudaMemcpyAsync(host + s.offset, session.device[static_cast<size_t>(s.buffer)],
                                     s.bytes, cudaMemcpyDeviceToHost, session.stream),
                     "copying a host step's input from the device"));
    }
    KILN_RETURN_IF_ERROR(check_cuda(cudaStreamSynchronize(session.stream), "a device step"));
    std::vector<void*> in(inputs_.size(), nullptr);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Slot& s = inputs_[i];
      if (s.buffer >= 0) in[i] = s.host != nullptr ? const_cast<void*>(s.host) : host + s.offset;
    }
    std::vector<void*> out(outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) out[i] = host + outputs_[i].offset;
    KILN_RETURN_IF_ERROR(runtime::run_ref_step(*node, nullptr, session.interpreter.get(),
                                               ref_inputs_, in, ref_outputs_, out));
    for (const Slot& s : outputs_) {
      if (s.bytes == 0) continue;
      KILN_RETURN_IF_ERROR(
          check_cuda(cudaMemcpyAsync(session.device[static_cast<size_t>(s.buffer)], host + s.offset,
                                     s.bytes, cudaMemcpyHostToDevice, session.stream),
                     "copying a host step's output to the device"));
    }
    return Status();
  }

 private:
  std::vector<Slot> inputs_;
  std::vector<Slot> outputs_;
  std::vector<RefSlot> ref_inputs_;  // their types, as run_ref_step takes them
  std::vector<RefSlot> ref_outputs_;
};

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
    : buffers_(std::move(buffers)),
      steps_(std::move(steps)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      plan_(std::move(plan)),
      workspace_bytes_(workspace_bytes),
      seed_(seed) {
  size_t at = 0;
  for (int id : inputs_) {
    staging_.input_offsets.push_back(at);
    at += align_up(buffers_[static_cast<size_t>(id)].bytes);
  }
  for (int id : outputs_) {
    staging_.output_offsets.push_back(staging_.output_bytes);
    staging_.output_bytes += align_up(buffers_[static_cast<size_t>(id)].bytes);
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
    at += align_up(buffers_[i].bytes);
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

int Program::count_steps(std::string_view kind) const {
  return runtime::count_steps(steps_, kind);
}

int Program::device_steps() const {
  return static_cast<int>(
      std::count_if(steps_.begin(), steps_.end(), [](const auto& s) { return s->on_device; }));
}

// ---- Builder ----

int Builder::stored_buffer(const Value* v) const {
  auto it = value_buffers_.find(v);
  KILN_CHECK(it != value_buffers_.end());
  return it->second;
}

// A 4-D tensor of one pixel ([N, C, 1, 1], squeeze-and-excitation's) has the same bytes in
// either layout: it needs no reorder.
static bool one_pixel(const Shape& s) {
  return s.rank() == 4 && s[2] * s[3] == 1;
}

int Builder::buffer_of(const Value* v) {
  const int id = stored_buffer(v);
  // The stored buffer's own shape counts too: a one-pixel NHWC buffer reshaped to another rank
  // (a detector head's [N, A*K, 1, 1] as [N, A, K, 1, 1]) is already plain.
  const Buffer& stored = buffers_[static_cast<size_t>(id)];
  if (!stored.nhwc || one_pixel(stored.shape) || one_pixel(v->tensor_type().shape())) return id;
  if (auto it = plain_copies_.find(v); it != plain_copies_.end()) return it->second;
  Buffer b = buffers_[static_cast<size_t>(id)];
  b.nhwc = false;
  b.first = b.last = -1;
  const int copy = add_buffer(std::move(b));
  plain_copies_[v] = copy;
  add_reorder(*this, id, copy, v->tensor_type().shape(), false);
  return copy;
}

int Builder::buffer_nhwc(const Value* v) {
  const int id = stored_buffer(v);
  if (buffers_[static_cast<size_t>(id)].nhwc || one_pixel(v->tensor_type().shape())) return id;
  if (auto it = nhwc_copies_.find(v); it != nhwc_copies_.end()) return it->second;
  // The stored buffer may be another shape's: a Reshape shares its input's bytes (a channel
  // shuffle's 5-D Transpose, reshaped back to 4-D), so the copy takes the value's own shape.
  const Shape& shape = v->tensor_type().shape();
  KILN_CHECK(shape.rank() == 4, "buffer_nhwc on a tensor that is not 4-D");
  Buffer b = buffers_[static_cast<size_t>(id)];
  b.shape = shape;
  b.nhwc = true;
  b.constant = false;
  b.host = nullptr;
  b.owned = nullptr;
  b.first = b.last = -1;
  const int copy = add_buffer(std::move(b));
  nhwc_copies_[v] = copy;
  add_reorder(*this, id, copy, v->tensor_type().shape(), true);
  return copy;
}

bool Builder::nhwc_convolutions(DType dtype) {
  const std::string layout = env_flag_string(EnvFlag::kCudaLayout);
  if (layout == "nhwc") return true;
  if (layout == "nchw") return false;
  return dtype == DType::kF16 || dtype == DType::kBF16;
}

int Builder::define(const Value* v, bool nhwc) {
  Buffer b;
  b.dtype = v->tensor_type().dtype;
  b.shape = v->tensor_type().shape();
  b.nhwc = nhwc && b.shape.rank() == 4;
  b.bytes = byte_size(b.dtype, b.shape);
  const int id = add_buffer(std::move(b));
  value_buffers_[v] = id;
  return id;
}

int Builder::scratch(DType dtype, Shape shape, bool nhwc) {
  Buffer b;
  b.dtype = dtype;
  b.nhwc = nhwc && shape.rank() == 4;
  b.bytes = byte_size(dtype, shape);
  b.shape = std::move(shape);
  return add_buffer(std::move(b));
}

int Builder::define_buffer(const Value* v, Buffer b) {
  const int id = add_buffer(std::move(b));
  if (v != nullptr) value_buffers_[v] = id;
  return id;
}

int Builder::constant(std::vector<float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return constant_bytes(DType::kF32, Shape{static_cast<int64_t>(values.size())}, std::move(bytes));
}

int Builder::constant_bytes(DType dtype, Shape shape, std::vector<uint8_t> bytes) {
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Buffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.bytes = data->size();
  b.constant = true;
  b.host = data->data();
  b.owned = std::move(data);
  return add_buffer(std::move(b));
}

void Builder::add_step(std::unique_ptr<Step> step) {
  append_step(std::move(step), [](int id) { return id; });
}

const Node* Builder::only_consumer(const Value* v) const {
  for (const Value* out : graph_.outputs()) {
    if (out == v) return nullptr;
  }
  if (v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

void Builder::add_host_step(const Node& node) {
  size_t at = 0;
  auto slot = [&](const Value* v, int id) {
    HostStep::Slot s;
    s.buffer = id;
    s.dtype = v->tensor_type().dtype;
    s.shape = v->tensor_type().shape();
    s.bytes = byte_size(s.dtype, s.shape);
    const Buffer& b = buffer(id);
    if (b.constant) {
      s.host = b.host;
    } else {
      s.offset = at;
      at += align_up(s.bytes);
    }
    return s;
  };
  std::vector<HostStep::Slot> inputs;
  std::vector<int> reads;
  for (const Value* v : node.inputs()) {
    if (v == nullptr) {
      inputs.emplace_back();
      continue;
    }
    inputs.push_back(slot(v, buffer_of(v)));
    reads.push_back(inputs.back().buffer);
  }
  std::vector<HostStep::Slot> outputs;
  std::vector<int> writes;
  for (const Value* v : node.outputs()) {
    outputs.push_back(slot(v, define(v)));
    writes.push_back(outputs.back().buffer);
  }
  host_step_bytes_ = std::max(host_step_bytes_, at);
  auto step = std::make_unique<HostStep>(node, std::move(inputs), std::move(outputs));
  step->reads = std::move(reads);
  step->writes = std::move(writes);
  add_step(std::move(step));
}

const std::vector<uint8_t>* Builder::known_choice(const std::string& key) const {
  for (const Tuning* t : {static_cast<const Tuning*>(tuner_.found), tuner_.stored}) {
    if (t == nullptr) continue;
    auto it = t->choices.find(key);
    if (it != t->choices.end()) return &it->second;
  }
  return nullptr;
}

void Builder::record_choice(const std::string& key, std::vector<uint8_t> bytes, bool measured) {
  if (tuner_.found != nullptr) tuner_.found->choices[key] = std::move(bytes);
  if (tuner_.progress != nullptr) tuner_.progress->step(measured);
}

Result<std::unique_ptr<Program>> Builder::build() {
  if (std::string why = runtime::why_not_plannable(graph_); !why.empty()) {
    log(LogLevel::kDebug, "cuda target: the interpreter runs graph \"{}\": {}", graph_.name(), why);
    return std::unique_ptr<Program>();
  }
  std::vector<int> inputs;
  for (const Value* v : graph_.inputs()) {
    inputs.push_back(define(v));
    buffers_.back().first = 0;
  }
  plan_attention(*this);
  for (const auto& node : graph_.nodes()) {
    if (is_fused(node.get())) continue;
    if (node->kind() == OpKind::kConstant) {
      const Tensor* c = node->output(0)->constant_value();
      if (c == nullptr) return std::unique_ptr<Program>();
      Buffer b;
      b.dtype = c->dtype();
      b.shape = c->shape();
      b.bytes = c->nbytes();
      b.constant = true;
      b.host = c->raw_data();
      value_buffers_[node->output(0)] = add_buffer(std::move(b));
      continue;
    }
    current_ = node.get();
    KILN_ASSIGN_OR_RETURN(bool lowered, lower_device(*this, *node));
    if (!lowered) add_host_step(*node);
  }
  // Outputs stored NHWC are reordered back after the last node.
  std::vector<int> outputs;
  std::vector<Shape> output_shapes;
  for (const Value* v : graph_.outputs()) {
    outputs.push_back(buffer_of(v));
    output_shapes.push_back(v->tensor_type().shape());
  }
  MemoryPlan plan = plan_arena(inputs, outputs, kAlignment, [](const Buffer& b) {
    return BufferLifetime{b.constant ? 0 : b.bytes, std::max(b.first, 0), std::max(b.last, 0)};
  });
  auto program = std::make_unique<Program>(std::move(buffers_), std::move(steps_),
                                           std::move(inputs), std::move(outputs), std::move(plan),
                                           workspace_bytes_, host_step_bytes_, seed_);
  program->set_output_shapes(std::move(output_shapes));
  KILN_RETURN_IF_ERROR(program->upload_constants());
  return program;
}

}  // namespace kiln::compiler::cuda
