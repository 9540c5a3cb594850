// SPDX-License-Identifier: Apache-2.0
// The cuda target: the cpu target's passes, then a Program of device and host steps; a graph with
// dynamic input dims is compiled again for each input shape it runs with (runtime/shape_profiles),
// and graphs it cannot plan (subgraphs, shapes only a run reveals) run on the ref interpreter so
// any model runs.
#include "compiler/targets/cuda/cuda_target.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "compiler/passes/passes.h"
#include "compiler/runtime/session_pool.h"
#include "compiler/runtime/shape_profiles.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/cublaslt_loader.h"
#include "compiler/targets/cuda/quantized.h"
#include "compiler/targets/ref/interpreter.h"
#include "core/gpu.h"
#include "core/logging.h"

namespace kiln::compiler {

namespace {

// The compile-time library handles (algorithm search needs them), made once per process and GPU:
// a cuDNN handle belongs to the device that was current when it was made.
struct Handles {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  Status made;
  std::mutex mutex;  // compiles search algorithms one at a time
};

Result<Handles*> compile_handles() {
  static std::mutex mutex;
  static auto* per_device = new std::map<int, Handles*>();
  int device = 0;
  KILN_RETURN_IF_ERROR(cuda::check_cuda(cudaGetDevice(&device), "asking for the current GPU"));
  std::lock_guard<std::mutex> lock(mutex);
  Handles*& handles = per_device->try_emplace(device, nullptr).first->second;
  if (handles == nullptr) {
    handles = new Handles();
    handles->made = [&]() -> Status {
      KILN_RETURN_IF_ERROR(cuda::load_cublaslt());
      KILN_RETURN_IF_ERROR(cuda::check_cudnn(cudnnCreate(&handles->cudnn), "creating a handle"));
      return cuda::check_cublas(cublasLtCreate(&handles->lt), "creating a handle");
    }();
  }
  KILN_RETURN_IF_ERROR(handles->made);
  return handles;
}

// Makes `device` the calling thread's GPU for the scope, and the one before it again after.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (cudaGetDevice(&before_) == cudaSuccess && before_ != device) {
      set_ = cudaSetDevice(device) == cudaSuccess;
    }
  }
  ~OnDevice() {
    if (set_) cudaSetDevice(before_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int before_ = 0;
  bool set_ = false;
};

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(std::shared_ptr<Graph> graph, uint64_t seed,
                 std::unique_ptr<cuda::Program> program, cuda::Tuning tuning,
                 ShapeProfiles::Compile compile_profile)
      : graph_(std::move(graph)),
        seed_(seed),
        program_(std::move(program)),
        tuning_(std::move(tuning)),
        sessions_([p = program_.get()] { return p->new_session(); }) {
    cudaGetDevice(&device_);  // the GPU the program's constants were put on
    if (compile_profile) profiles_ = std::make_unique<ShapeProfiles>(*graph_, compile_profile);
  }
  ~CudaExecutable() override {
    // The sessions' streams, arenas and handles are freed on the GPU they were made on.
    const OnDevice on(device_);
    sessions_.clear();
  }

  std::string_view target() const override { return "cuda"; }
  const Graph& graph() const override { return *graph_; }
  Result<std::vector<Argument>> run(std::vector<Argument> inputs) const override {
    return run_with(std::move(inputs), nullptr);
  }
  Result<std::vector<Argument>> run_profiled(std::vector<Argument> inputs,
                                             RunProfile& profile) const override {
    profile.steps.clear();
    return run_with(std::move(inputs), &profile);
  }
  Status run_device(const std::vector<const void*>& inputs,
                    const std::vector<void*>& outputs) const override {
    if (program_ == nullptr) {
      return unimplemented_error(
          profiles_ != nullptr
              ? "cuda target: this graph has dynamic input dims, compiled for the shapes of the "
                "tensors run() is given: pass host tensors to run()"
              : "cuda target: this graph has subgraphs or data-dependent shapes and runs on the "
                "host (ref): pass host tensors to run()");
    }
    if (inputs.size() != graph_->inputs().size() || outputs.size() != graph_->outputs().size()) {
      return invalid_argument_error(fmt::format(
          "run_device: the model takes {} inputs and gives {} outputs; got {} and {} pointers",
          graph_->inputs().size(), graph_->outputs().size(), inputs.size(), outputs.size()));
    }
    for (const void* p : inputs) {
      if (p == nullptr) return invalid_argument_error("run_device: an input pointer is null");
    }
    for (const void* p : outputs) {
      if (p == nullptr) return invalid_argument_error("run_device: an output pointer is null");
    }
    const OnDevice on(device_);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Session> session, sessions_.take());
    Status out = program_->run_device(*session, inputs, outputs);
    if (out.ok()) sessions_.give_back(std::move(session));
    return out;
  }
  Result<std::vector<OutputRange>> run_ranges(std::vector<Argument> inputs) const override {
    if (program_ == nullptr) return Executable::run_ranges(std::move(inputs));
    KILN_RETURN_IF_ERROR(check_inputs(*graph_, inputs));
    const OnDevice on(device_);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Session> session, sessions_.take());
    Result<std::vector<OutputRange>> out = program_->run_ranges(*session, inputs);
    if (out.ok()) sessions_.give_back(std::move(session));
    return out;
  }
  Result<Tensor> host_tensor(DType dtype, Shape shape) const override {
    if (dtype == DType::kString) return Tensor::allocate(dtype, std::move(shape));
    KILN_ASSIGN_OR_RETURN(const int64_t numel, shape.checked_numel());
    const size_t bytes = std::max<size_t>(1, static_cast<size_t>(numel) * dtype_size(dtype));
    void* p = nullptr;
    KILN_RETURN_IF_ERROR(cuda::check_cuda(
        cudaMallocHost(&p, bytes),
        fmt::format("allocating {} bytes of page-locked host memory for a {} input", bytes,
                    shape.to_string())));
    std::shared_ptr<const void> owner(p, [](const void* q) { cudaFreeHost(const_cast<void*>(q)); });
    return Tensor::wrap(dtype, std::move(shape), p, std::move(owner));
  }
  const cuda::Program* program() const { return program_.get(); }
  const ShapeProfiles* profiles() const { return profiles_.get(); }
  // The algorithm choices, with this GPU's fingerprint, for artifacts.
  std::vector<TargetSection> artifact_sections() const override {
    if (tuning_.choices.empty()) return {};
    return {TargetSection::of(cuda::kTuningSection, tuning_.encode())};
  }

 private:
  Result<std::vector<Argument>> run_with(std::vector<Argument> inputs, RunProfile* profile) const {
    KILN_RETURN_IF_ERROR(check_inputs(*graph_, inputs));
    if (program_ == nullptr && profiles_ != nullptr) {
      // Dynamic dims: the program compiled for these shapes (on this executable's GPU, now, on
      // first sight).
      const OnDevice on(device_);
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, profiles_->get(inputs));
      return profile != nullptr ? exe->run_profiled(std::move(inputs), *profile)
                                : exe->run(std::move(inputs));
    }
    if (program_ == nullptr) {
      ref::Interpreter interpreter(seed_);
      return interpreter.run(*graph_, std::move(inputs));
    }
    const OnDevice on(device_);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Session> session, sessions_.take());
    Result<std::vector<Argument>> out = program_->run(*session, inputs, profile);
    // A session whose run failed may hold a broken stream: drop it.
    if (out.ok()) sessions_.give_back(std::move(session));
    return out;
  }

  std::shared_ptr<Graph> graph_;
  uint64_t seed_;
  std::unique_ptr<cuda::Program> program_;
  cuda::Tuning tuning_;
  int device_ = 0;
  SessionPool<cuda::Session> sessions_;
  std::unique_ptr<ShapeProfiles> profiles_;  // for graphs with dynamic input dims
};

class CudaTarget final : public Target {
 public:
  std::string_view name() const override { return "cuda"; }
  bool supports(const Node&) const override { return true; }
  std::vector<std::unique_ptr<Pass>> passes(const CompileOptions&) const override {
    std::vector<std::unique_ptr<Pass>> passes = standard_passes();
    // Folding shape computations leaves static types to infer (a transformer's Reshape targets):
    // without them the graph is not plannable and runs on the host interpreter.
    passes.push_back(make_type_refinement());
    passes.push_back(make_layer_norm_fusion());
    for (auto& pass : standard_passes()) passes.push_back(std::move(pass));
    // QDQ regions become QLinearConv and friends, which run on int8 kernels (quantized.cc).
    passes.push_back(make_qdq_fusion(/*max_pools=*/false, /*grouped_convs=*/false,
                                     /*silu_convs=*/cuda::int8_silu_conv));
    // The float Convs and Dequantizes the fusion replaced would otherwise still run.
    passes.push_back(make_dead_code_elimination());
    passes.push_back(make_conv_activation_fusion());
    return passes;
  }
  Result<std::shared_ptr<Executable>> finalize(std::shared_ptr<Graph> graph,
                                               const CompileOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(Handles * handles, compile_handles());
    std::lock_guard<std::mutex> lock(handles->mutex);
    cuda::Tuning found;
    found.fingerprint = cuda::gpu_fingerprint();
    KILN_ASSIGN_OR_RETURN(std::optional<cuda::Tuning> stored,
                          stored_tuning(options, found.fingerprint));
    cuda::TuningProgress progress(count_tunable(*graph));
    cuda::Builder::Tuner tuner{stored ? &*stored : nullptr, &found, &progress};
    KILN_ASSIGN_OR_RETURN(
        std::unique_ptr<cuda::Program> program,
        cuda::Builder(*graph, options.seed, handles->cudnn, handles->lt, tuner).build());
    // A graph with dynamic input dims is compiled again for each input shape it is run with.
    ShapeProfiles::Compile compile_profile;
    if (program == nullptr && can_specialize(*graph)) {
      CompileOptions profile_options = options;
      profile_options.loaded = nullptr;
      compile_profile =
          [profile_options](std::shared_ptr<Graph> g) -> Result<std::shared_ptr<Executable>> {
        KILN_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, make_cuda_target());
        return compile(std::move(g), *target, profile_options);
      };
      log(LogLevel::kDebug,
          "cuda target: the graph has dynamic input dims; it is compiled for each input shape "
          "it runs with");
    } else if (program == nullptr) {
      log(LogLevel::kInfo,
          "cuda target: the graph has subgraphs or data-dependent shapes; it runs on the host "
          "(ref)");
    } else if (log_enabled(LogLevel::kDebug)) {
      log(LogLevel::kDebug,
          "cuda target: {} steps ({} on the device), arena {} bytes ({} unplanned), constants {} "
          "bytes",
          program->steps().size(), program->device_steps(), program->arena_bytes(),
          program->unplanned_bytes(), program->constant_bytes());
      for (const auto& step : program->steps()) {
        if (!step->on_device) log(LogLevel::kDebug, "cuda target: on the host: {}", step->kind);
      }
    }
    return std::shared_ptr<Executable>(
        std::make_shared<CudaExecutable>(std::move(graph), options.seed, std::move(program),
                                         std::move(found), std::move(compile_profile)));
  }

 private:
  // The tuning a loaded artifact stored, when it was measured on this GPU with these libraries;
  // nullopt (re-tune) when it was not, or there is none.
  static Result<std::optional<cuda::Tuning>> stored_tuning(const CompileOptions& options,
                                                           const std::string& fingerprint) {
    const std::span<const uint8_t>* bytes =
        options.loaded != nullptr ? options.loaded->find(cuda::kTuningSection) : nullptr;
    if (bytes == nullptr) return std::optional<cuda::Tuning>();
    KILN_ASSIGN_OR_RETURN(cuda::Tuning t, cuda::Tuning::decode(*bytes));
    if (t.fingerprint == fingerprint) return std::optional<cuda::Tuning>(std::move(t));
    log(LogLevel::kInfo,
        "cuda target: the artifact was tuned on \"{}\"; this is \"{}\": tuning again",
        t.fingerprint, fingerprint);
    return std::optional<cuda::Tuning>();
  }

  // The nodes whose algorithms are measured (the progress bar's total).
  static int count_tunable(const Graph& graph) {
    int n = 0;
    for (const auto& node : graph.nodes()) {
      const OpKind k = node->kind();
      n += k == OpKind::kConv || k == OpKind::kGemm || k == OpKind::kMatMul ||
                   k == OpKind::kQLinearConv
               ? 1
               : 0;
    }
    return n;
  }
};

}  // namespace

Result<std::unique_ptr<Target>> make_cuda_target() {
  std::string why;
  std::vector<GpuInfo> gpus = list_gpus(&why);
  if (gpus.empty()) {
    return unavailable_error(fmt::format(
        "target cuda: no GPU was found ({}); run on a machine with an NVIDIA GPU and driver, or "
        "use --target cpu",
        why.empty() ? "no CUDA device" : why));
  }
  return std::unique_ptr<Target>(std::make_unique<CudaTarget>());
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

Result<int> cuda_use_device(int device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    return invalid_argument_error(
        fmt::format("target cuda: there is no GPU {}; this machine has {} (0 to {})", device, count,
                    count - 1));
  }
  int before = 0;
  KILN_RETURN_IF_ERROR(cuda::check_cuda(cudaGetDevice(&before), "asking for the current GPU"));
  KILN_RETURN_IF_ERROR(
      cuda::check_cuda(cudaSetDevice(device), fmt::format("making GPU {} current", device)));
  return before;
}

const cuda::Program* cuda_program(const Executable& executable) {
  const auto* e = dynamic_cast<const CudaExecutable*>(&executable);
  return e != nullptr ? e->program() : nullptr;
}

const ShapeProfiles* cuda_shape_profiles(const Executable& executable) {
  const auto* e = dynamic_cast<const CudaExecutable*>(&executable);
  return e != nullptr ? e->profiles() : nullptr;
}

}  // namespace kiln::compiler
