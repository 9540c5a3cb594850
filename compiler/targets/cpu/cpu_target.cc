// SPDX-License-Identifier: Apache-2.0
// The cpu target: standard passes plus fusion; finalize lowers a static graph to a Program
// (oneDNN steps in blocked layouts, ref steps for the rest, buffers planned in one arena) and
// keeps the interpreter with oneDNN node kernels for graphs it cannot plan.
#include "compiler/targets/cpu/cpu_target.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "compiler/passes/passes.h"
#include "compiler/runtime/session_pool.h"
#include "compiler/runtime/shape_profiles.h"
#include "compiler/runtime/threads.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/node_program.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/packed_constants.h"
#include "compiler/targets/ref/interpreter.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler {

namespace {

// The oneDNN kernel for `node` (the node alone as a program), or nullptr to run its ref kernel:
// for the ops with work enough to repay a program's session, where oneDNN runs them.
std::unique_ptr<ref::NodeKernel> make_kernel(const Node& node, const dnnl::engine& engine,
                                             uint64_t seed) {
  switch (node.kind()) {
    case OpKind::kConv:
    case OpKind::kConvTranspose:
    case OpKind::kMatMul:
    case OpKind::kGemm:
    case OpKind::kLSTM: break;
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool:
    case OpKind::kBatchNormalization:
    case OpKind::kLayerNormalization:
    case OpKind::kSoftmax:
    case OpKind::kResize:
    case OpKind::kRelu:
    case OpKind::kAdd:
    case OpKind::kMul: {
      // The elements the node reads or writes, at most: a pool's input, a binary op's output.
      constexpr int64_t kFewElements = 4096;
      int64_t elements = 0;
      for (const Value* v : {node.input(0), node.output(0)}) {
        if (v != nullptr && v->type().is_tensor() && v->tensor_type().is_static()) {
          elements = std::max(elements, v->tensor_type().shape().numel());
        }
      }
      if (elements < kFewElements) return nullptr;
      break;
    }
    default: return nullptr;
  }
  return cpu::make_node_kernel(node, engine, seed);
}

// Kernels for the nodes of `graph` and of its subgraphs.
void add_kernels(const Graph& graph, const dnnl::engine& engine, uint64_t seed,
                 ref::KernelTable& table) {
  for (const auto& node : graph.nodes()) {
    for (const Graph* sub : node->op().subgraphs()) add_kernels(*sub, engine, seed, table);
    if (std::unique_ptr<ref::NodeKernel> kernel = make_kernel(*node, engine, seed)) {
      table.emplace(node.get(), std::move(kernel));
    }
  }
}

// The runnable threads of the machine (/proc/loadavg's fourth field, "3/420": runnable/total),
// or -1 where it cannot be read.
long runnable_threads() {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* field = text;
  for (int spaces = 0; spaces < 3 && field != nullptr; ++spaces) {
    field = std::strchr(field, ' ');
    if (field != nullptr) ++field;
  }
  return field != nullptr ? std::strtol(field, nullptr, 10) : -1;
}

bool has_if(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (node->kind() == OpKind::kIf) return true;
  }
  return false;
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::shared_ptr<Graph> graph, uint64_t seed, int threads, dnnl::engine engine,
                std::unique_ptr<cpu::WeightArena> weights, ref::KernelTable kernels,
                std::unique_ptr<cpu::Program> program, cpu::DroppedConstants dropped,
                std::shared_ptr<const void> mapping,
                ShapeProfiles::Compile compile_profile = nullptr)
      : graph_(std::move(graph)),
        mapping_(std::move(mapping)),
        seed_(seed),
        threads_(threads),
        engine_(std::move(engine)),
        weights_(std::move(weights)),
        kernels_(std::move(kernels)),
        program_(std::move(program)),
        dropped_(std::move(dropped)),
        sessions_([p = program_.get()] { return p->new_session(); }),
        cores_(static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)))),
        busy_threads_(env_flag_bool(EnvFlag::kCpuBusyThreads)) {
    if (compile_profile) profiles_ = std::make_unique<ShapeProfiles>(*graph_, compile_profile);
  }

  std::string_view target() const override { return "cpu"; }
  const Graph& graph() const override { return *graph_; }
  Result<std::vector<Argument>> run(std::vector<Argument> inputs) const override {
    return run_with(std::move(inputs), nullptr);
  }
  Result<std::vector<Argument>> run_profiled(std::vector<Argument> inputs,
                                             RunProfile& profile) const override {
    profile.steps.clear();
    return run_with(std::move(inputs), &profile);
  }
  Result<std::shared_ptr<const Graph>> graph_with_constants() const override {
    if (dropped_.empty()) return Executable::graph_with_constants();
    return dropped_.restore(*graph_, engine_);
  }
  // The weights the program holds packed are stored packed, where a file can say how.
  Result<ArtifactContents> artifact_contents() const override {
    if (dropped_.empty()) return Executable::artifact_contents();
    KILN_ASSIGN_OR_RETURN(cpu::DroppedConstants::ArtifactForm form,
                          dropped_.artifact_form(*graph_, engine_));
    ArtifactContents contents{std::move(form.graph), {}};
    if (!form.section.empty()) {
      contents.sections.push_back(
          TargetSection::of(std::string(cpu::kPackedSection), std::move(form.section)));
    }
    return contents;
  }
  int dnnl_node_count() const {
    return program_ != nullptr ? program_->dnnl_nodes() : static_cast<int>(kernels_.size());
  }
  const cpu::Program* program() const { return program_.get(); }
  const ShapeProfiles* profiles() const { return profiles_.get(); }

 private:
  Result<std::vector<Argument>> run_with(std::vector<Argument> inputs, RunProfile* profile) const {
    KILN_RETURN_IF_ERROR(check_inputs(*graph_, inputs));
    // oneDNN's OpenMP team size is per calling thread; a busy machine gets one thread (above).
    const int team = busy_threads_ && program_ != nullptr && !program_->one_thread()
                         ? threads_on_busy_machine(threads_, cores_, runnable_threads())
                         : threads_;
    if (omp_get_max_threads() != team) omp_set_num_threads(team);
    if (program_ == nullptr && profiles_ != nullptr) {
      // Dynamic dims: the program compiled for these shapes (compiled now on first sight).
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, profiles_->get(inputs));
      return profile != nullptr ? exe->run_profiled(std::move(inputs), *profile)
                                : exe->run(std::move(inputs));
    }
    if (program_ == nullptr) {
      ref::Interpreter interpreter(seed_, &kernels_);
      return interpreter.run(*graph_, std::move(inputs));
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<cpu::Session> session, sessions_.take());
    Result<std::vector<Argument>> out = program_->run(*session, inputs, profile);
    const bool fallback = session->ctx.fallback;
    session->ctx.fallback = false;
    sessions_.give_back(std::move(session));
    if (fallback) {
      if (profile != nullptr) profile->steps.clear();
      // An If took a branch the program could not plan (it does not type-check for the shapes
      // compiled): the interpreter runs the call, finding types as it goes.
      ref::Interpreter interpreter(seed_, &kernels_);
      return interpreter.run(*graph_, std::move(inputs));
    }
    return out;
  }

  std::shared_ptr<Graph> graph_;
  // A loaded artifact's mapping, which the graph's constants point into.
  std::shared_ptr<const void> mapping_;
  uint64_t seed_;
  int threads_;
  dnnl::engine engine_;
  // The packed weights of kernels_, program_ and dropped_ (destroyed after them).
  std::unique_ptr<cpu::WeightArena> weights_;
  ref::KernelTable kernels_;
  std::unique_ptr<cpu::Program> program_;
  // The graph's constants that program_ holds only packed (their values dropped from graph_).
  cpu::DroppedConstants dropped_;
  SessionPool<cpu::Session> sessions_;
  std::unique_ptr<ShapeProfiles> profiles_;  // for graphs with dynamic input dims
  int cores_;                                // online logical CPUs
  bool busy_threads_;                        // KILN_CPU_BUSY_THREADS, read at compile time
};

// Sets the calling thread's OpenMP team size while it lives.
class TeamSize {
 public:
  explicit TeamSize(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~TeamSize() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int saved_;
};

class CpuTarget final : public Target {
 public:
  std::string_view name() const override { return "cpu"; }
  bool supports(const Node&) const override { return true; }
  std::vector<std::unique_ptr<Pass>> passes(const CompileOptions&) const override {
    // Float16 graphs compute in float32: oneDNN has no float16 kernels for processors without
    // AVX512-FP16, and the ref kernels are a hundred times slower.
    std::vector<std::unique_ptr<Pass>> passes;
    passes.push_back(make_float16_widening());
    for (auto& pass : standard_passes()) passes.push_back(std::move(pass));
    // Folding shape computations leaves static types to infer (Reshape targets): the planned
    // program needs them, and they let the clean-up go further.
    passes.push_back(make_type_refinement());
    // An If with one branch that cannot run for these shapes is planned with the other's types
    // (the program runs the interpreter should that branch be taken); its users typed after it.
    passes.push_back(make_if_output_typing());
    passes.push_back(make_type_refinement());
    passes.push_back(make_layer_norm_fusion());
    // Quantized regions become integer ops (oneDNN int8 kernels) before the second clean-up.
    passes.push_back(make_qdq_fusion(/*max_pools=*/true));
    // Quantized weights no integer op took run as f32 constants (packed once), not dequantized
    // at every run.
    passes.push_back(make_constant_folding(int64_t{1} << 24, /*quantized_weights=*/true));
    // tf2onnx's explicit Pads before strided convolutions become the convolutions' own padding.
    passes.push_back(make_pad_conv_fusion());
    for (auto& pass : standard_passes()) passes.push_back(std::move(pass));
    passes.push_back(make_pool_before_pointwise_conv());
    // Before the Relus are fused: a split Conv's Relu follows the sum of its pieces.
    passes.push_back(make_concat_distribution());
    passes.push_back(make_conv_activation_fusion());
    return passes;
  }
  Result<std::shared_ptr<Executable>> finalize(std::shared_ptr<Graph> graph,
                                               const CompileOptions& options) const override {
    dnnl::engine engine;
    try {
      engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      return internal_error(fmt::format("cpu target: oneDNN has no CPU engine: {}", e.what()));
    }
    // The kernel table serves the nodes a program runs as ref steps, or every node when the
    // interpreter runs the graph; weights are packed once, for whichever runs them.
    ref::KernelTable kernels;
    std::unique_ptr<cpu::Program> program;
    // Every weight packed here goes into one arena on huge pages, which the executable keeps.
    auto weights = std::make_unique<cpu::WeightArena>();
    const cpu::PackInto pack_into(weights.get());
    // A loaded artifact's plain weights are read once, to pack them: their pages of the file's
    // mapping leave resident memory as they are packed, so a loaded model holds its weights once.
    cpu::ReleaseAfterPacking packed(options.loaded != nullptr && options.loaded->mapped
                                        ? options.loaded->file
                                        : std::span<const uint8_t>());
    // Those it stores already packed are taken where they are, in the file's mapping.
    std::optional<cpu::StoredPackings> stored;
    if (options.loaded != nullptr) {
      if (const std::span<const uint8_t>* section = options.loaded->find(cpu::kPackedSection)) {
        KILN_ASSIGN_OR_RETURN(cpu::StoredPackings read,
                              cpu::StoredPackings::read(*section, *graph, options.loaded->artifact,
                                                        options.loaded->recompile_hint, &packed));
        stored = std::move(read);
      }
    }
    // Weights the program holds only packed leave the graph as they are packed (they are unpacked
    // again for an artifact): the model holds its weights once, at its peak too.
    cpu::DroppedConstants dropped;
    std::unordered_set<const Value*> unread;  // constants no step reads
    const int threads = options.threads > 0 ? options.threads : physical_core_count();
    {
      // Primitives take the OpenMP team size of the thread that makes them (oneDNN's jit 1x1
      // convolutions split their work for it and run that many threads whatever the team is
      // later): they are made with the executable's.
      const TeamSize team(threads);
      if (!env_flag_bool(EnvFlag::kCpuInterpret)) {
        auto factory = [&engine, seed = options.seed](const Node& node) {
          return make_kernel(node, engine, seed);
        };
        cpu::ProgramBuilder builder(*graph, engine, &kernels, factory, options.seed);
        // A graph with an If keeps its weights: a branch the program cannot plan runs on the
        // interpreter, which reads them (the models with Ifs are small).
        if (!has_if(*graph)) {
          builder.set_constant_release([&dropped, &packed, &unread](const Value* v) {
            unread.insert(v);
            return dropped.drop(v, packed);
          });
        }
        Result<std::unique_ptr<cpu::Program>> built = builder.build();
        if (!built.ok()) {
          // The graph keeps its weights: `dropped` holds the packed copies to unpack.
          KILN_RETURN_IF_ERROR(dropped.undo(engine));
          return built.status();
        }
        program = std::move(built).value();
      }
      if (stored && program != nullptr) {
        KILN_ASSIGN_OR_RETURN(bool settled, stored->settle(engine, [&unread](const Value* v) {
          return unread.count(v) != 0;
        }));
        if (!settled) {
          // A step reads a weight stored packed as plain values (this lowering is not the one
          // that compiled the artifact): built again from the graph unpacked, section set aside.
          log(LogLevel::kDebug,
              "cpu target: {}: its program reads weights stored packed as plain values; "
              "unpacking them and building it again",
              options.loaded->artifact);
          program.reset();
          kernels.clear();
          KILN_RETURN_IF_ERROR(dropped.undo(engine));
          KILN_RETURN_IF_ERROR(stored->unpack(engine));
          auto loaded = std::make_shared<LoadedSections>(*options.loaded);
          std::erase_if(loaded->sections,
                        [](const auto& s) { return s.first == cpu::kPackedSection; });
          CompileOptions unpacked = options;
          unpacked.loaded = std::move(loaded);
          return finalize(std::move(graph), unpacked);
        }
      }
      if (program == nullptr) {
        // The interpreter reads plain values.
        if (stored) KILN_RETURN_IF_ERROR(stored->unpack(engine));
        add_kernels(*graph, engine, options.seed, kernels);
      }
    }
    // A graph with dynamic input dims is compiled again for each input shape it is run with.
    ShapeProfiles::Compile compile_profile;
    if (program == nullptr && !env_flag_bool(EnvFlag::kCpuInterpret) && can_specialize(*graph)) {
      CompileOptions profile_options = options;
      profile_options.loaded = nullptr;
      compile_profile = [profile_options](std::shared_ptr<Graph> g) {
        return compile(std::move(g), *make_cpu_target(), profile_options);
      };
    }
    if (log_enabled(LogLevel::kDebug)) {
      std::string nodes;
      for (const auto& node : graph->nodes()) {
        if (kernels.count(node.get()) != 0) nodes += (nodes.empty() ? "" : ", ") + node->describe();
      }
      log(LogLevel::kDebug, "cpu target: {} of {} nodes have oneDNN kernels: {}", kernels.size(),
          graph->num_nodes(), nodes);
      log(LogLevel::kDebug,
          "cpu target: {} weights packed ({} bytes of them released, {} dropped from the graph: "
          "{} bytes; {} bytes of packed weights in {} bytes of blocks)",
          packed.packed(), packed.released_bytes(), dropped.count(), dropped.bytes(),
          weights->used_bytes(), weights->reserved_bytes());
      if (stored) {
        log(LogLevel::kDebug,
            "cpu target: {} weights stored packed in the artifact ({} bytes, {} of them used in "
            "place)",
            stored->count(), stored->bytes(), stored->in_place_bytes(packed));
      }
      if (program != nullptr) {
        log(LogLevel::kDebug, "cpu target: {} steps, {} reorders, arena {} bytes ({} unplanned)",
            program->steps().size(), program->count_steps("Reorder"), program->arena_bytes(),
            program->unplanned_bytes());
      }
    }
    return std::shared_ptr<Executable>(std::make_shared<CpuExecutable>(
        std::move(graph), options.seed, threads, std::move(engine), std::move(weights),
        std::move(kernels), std::move(program), std::move(dropped),
        options.loaded != nullptr ? options.loaded->owner : nullptr, std::move(compile_profile)));
  }
  Status unpack_stored_constants(Graph& graph, const LoadedSections& loaded) const override {
    const std::span<const uint8_t>* section = loaded.find(cpu::kPackedSection);
    if (section == nullptr) return Status();
    KILN_ASSIGN_OR_RETURN(cpu::StoredPackings stored,
                          cpu::StoredPackings::read(*section, graph, loaded.artifact,
                                                    loaded.recompile_hint, nullptr));
    try {
      return stored.unpack(dnnl::engine(dnnl::engine::kind::cpu, 0));
    } catch (const dnnl::error& e) {
      return internal_error(fmt::format("cpu target: oneDNN has no CPU engine: {}", e.what()));
    }
  }
};

}  // namespace

// oneDNN splits each step statically between the team's threads: on a busy machine a step waits
// for a thread the scheduler has not run yet, a time slice each (a 1 ms model took 50 ms in one run
// of ten at 2 threads on a 2-core machine running two compilers). The run's own threads are left
// out of the count whether they spin between runs or sleep.
int threads_on_busy_machine(int threads, int cores, long runnable) {
  if (threads <= 1 || runnable < 0) return threads;
  const long others = std::max(0L, runnable - threads);
  return others >= cores - 1 ? 1 : threads;
}

std::unique_ptr<Target> make_cpu_target() {
  return std::make_unique<CpuTarget>();
}

int cpu_dnnl_node_count(const Executable& executable) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&executable);
  return cpu != nullptr ? cpu->dnnl_node_count() : -1;
}

const ShapeProfiles* cpu_shape_profiles(const Executable& executable) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&executable);
  return cpu != nullptr ? cpu->profiles() : nullptr;
}

const cpu::Program* cpu_program(const Executable& executable) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&executable);
  return cpu != nullptr ? cpu->program() : nullptr;
}

}  // namespace kiln::compiler
