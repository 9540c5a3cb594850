// SPDX-License-Identifier: Apache-2.0
// The cpu target's planned execution: a list of steps over buffers placed in one arena by liveness.
#pragma once

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/memory_plan.h"
#include "compiler/runtime/plan.h"
#include "compiler/targets/ref/interpreter.h"
#include "compiler/targets/target.h"

namespace kiln::compiler::cpu {

// The alignment of every buffer in a session's arena.
inline constexpr size_t kArenaAlignment = 64;

// Whether `layout` addresses its elements in row-major order with no padding (the zero desc does).
bool is_row_major(const dnnl::memory::desc& layout);

// How convolutions lay out their activations: as oneDNN picks (NHWC on AVX-512 machines), or
// channel-blocked by 16 (nChw16c) with 3x3 stride-1 convolutions as Winograd F(2x2, 3x3).
enum class ConvLayout : uint8_t { kAny, kBlocked16 };

// The calling thread's OpenMP team is one thread while it lives, when `on`.
class TeamOfOne {
 public:
  explicit TeamOfOne(bool on) : team_(on ? omp_get_max_threads() : 0) {
    if (team_ > 1) omp_set_num_threads(1);
  }
  ~TeamOfOne() {
    if (team_ > 1) omp_set_num_threads(team_);
  }
  TeamOfOne(const TeamOfOne&) = delete;
  TeamOfOne& operator=(const TeamOfOne&) = delete;

 private:
  int team_;
};

// Where a tensor lives while the program runs (its type, size and liveness: PlannedBuffer).
struct Buffer : runtime::PlannedBuffer {
  // kView: the bytes of buffer `view_of` (an arena, input, constant or output buffer) from
  // `offset` on, read as another shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity) or
  // through strides (Transpose, Split, Slice; views.cc): no copy.
  enum class Kind : uint8_t { kArena, kInput, kConstant, kOutput, kView };
  Kind kind = Kind::kArena;
  // The f32 layout in memory (plain or blocked); a zero desc means plain row-major data.
  dnnl::memory::desc layout;
  int index = -1;                  // graph input or output index (kInput, kOutput)
  const void* constant = nullptr;  // kConstant
  int view_of = -1;                // kView: the buffer it reads (never itself a view)
  size_t offset = 0;               // kView: where it starts in `view_of`, in bytes
  // first, last: of kArena buffers, a view's reads counting as its buffer's.

  bool is_plain() const;
};

struct Session;

// What a step sees while it runs: every buffer's address, the stream and the interpreter (for
// ref kernels that draw random numbers).
struct StepContext {
  std::vector<void*> data;
  dnnl::stream* stream = nullptr;
  ref::Interpreter* interpreter = nullptr;
  // The oneDNN memory objects of each step over this session's buffers, made on the first run and
  // re-pointed only where a buffer moved (inputs, outputs): making them costs microseconds a step.
  struct Memories {
    std::unordered_map<int, dnnl::memory> args;
    dnnl::memory prefill_from;
  };
  std::vector<Memories> memories;  // one per step
  size_t step = 0;                 // the step running
  RunProfile* profile = nullptr;   // where step times go, when the run is profiled
  // Set by a step that cannot run this call (an If taking a branch that was not planned), which
  // then fails it: the executable runs the call on the interpreter instead.
  bool fallback = false;
  // The sessions of programs that steps run inside themselves (an If's branches), made on first
  // use; a step numbers its own (Step::nested_slots).
  std::vector<std::unique_ptr<Session>> nested;
};

// One unit of work: a node, several fused nodes, or a reorder between layouts.
class Step : public runtime::PlannedStep {
 public:
  virtual ~Step() = default;
  // May throw dnnl::error; the program turns it into a Status naming the node.
  virtual Status run(StepContext& ctx) const = 0;
  // What runs it, as profiles show it (StepTime::runs_on): kiln's own kernels unless overridden.
  virtual const char* runs_on() const { return "kiln"; }
  // Whether it adds its own entries to a run's profile (the steps of a branch it runs) instead
  // of one for itself.
  virtual bool profiles_itself() const { return false; }

  // Runs with an OpenMP team of one (its primitives were made for one thread).
  bool one_thread = false;
};

// The per-caller state of a program: its arena and stream. One session runs one call at a time.
struct Session {
  std::unique_ptr<uint8_t, void (*)(void*)> arena{nullptr, nullptr};
  std::unique_ptr<dnnl::stream> stream;
  StepContext ctx;
};

// A graph lowered to steps over planned buffers. Immutable once built; runs need a Session each.
class Program : public runtime::PlannedProgram<Buffer, Step> {
 public:
  Program(dnnl::engine engine, std::vector<Buffer> buffers,
          std::vector<std::unique_ptr<Step>> steps, std::vector<int> outputs, MemoryPlan plan,
          uint64_t seed, int dnnl_nodes, bool one_thread = false);

  // A session with an arena of its own, or, with `own_arena` false, one whose arena the caller
  // places with bind_arena before each run.
  Result<std::unique_ptr<Session>> new_session(bool own_arena = true) const;
  // Points the session's arena buffers into `arena` (arena_bytes() bytes, kArenaAlignment-aligned).
  void bind_arena(Session& session, uint8_t* arena) const;
  // Runs with inputs already checked against the graph; `profile` (optional) gets step times.
  Result<std::vector<Argument>> run(Session& session, std::vector<Argument> inputs,
                                    RunProfile* profile) const;
  // Runs over graph input i at `inputs[i]`, writing graph output i to `outputs[i]` (nullptr: not
  // wanted); appends step times to `profile` (optional). What an If's branch runs as, over its
  // enclosing program's buffers.
  Status run_into(Session& session, std::span<void* const> inputs, std::span<void* const> outputs,
                  RunProfile* profile) const;

  // How many graph nodes run on oneDNN (fused ones included).
  int dnnl_nodes() const { return dnnl_nodes_; }
  // Whether every step runs on one thread (a model with little work in all): runs then keep the
  // calling thread's team at one from the first step to the last.
  bool one_thread() const { return one_thread_; }

 private:
  dnnl::engine engine_;
  uint64_t seed_;
  int dnnl_nodes_;
  bool one_thread_;
};

// A step that runs one oneDNN primitive over buffers, with optional constant memories (packed
// weights) and a reorder that fills the destination first (a sum post-op's addend).
class PrimitiveStep final : public Step {
 public:
  struct Arg {
    int arg;     // DNNL_ARG_*
    int buffer;  // -1: `fixed` holds the memory
    dnnl::memory::desc layout;
    dnnl::memory fixed;
  };
  struct Prefill {
    dnnl::reorder reorder;
    int from;
    dnnl::memory::desc from_layout;
  };
  PrimitiveStep(dnnl::engine engine, dnnl::primitive primitive, std::vector<Arg> args,
                std::optional<Prefill> prefill = std::nullopt);
  Status run(StepContext& ctx) const override;
  const char* runs_on() const override { return kind == "Reorder" ? "reorder" : "onednn"; }

 private:
  dnnl::engine engine_;
  dnnl::primitive primitive_;
  std::vector<Arg> args_;
  std::optional<Prefill> prefill_;
};

// Adds the buffers of `args` to `step`'s reads, and its destination and scratchpad to its writes:
// what a step running a primitive over `args` touches.
void add_arg_buffers(Step& step, const std::vector<PrimitiveStep::Arg>& args);

}  // namespace kiln::compiler::cpu
