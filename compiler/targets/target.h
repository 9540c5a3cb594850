// SPDX-License-Identifier: Apache-2.0
// Target and Executable: a target is a list of passes plus kernels; compiling yields an Executable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/argument.h"
#include "compiler/ir/graph.h"
#include "compiler/passes/pass.h"
#include "core/status.h"

namespace kiln::compiler {

// Data a target stores in an artifact beside the graph, as a named section (kind kTargetData,
// found by name, e.g. the cuda target's "cuda.tuning"): byte pieces written one after another
// without a copy, kept alive by `owner`. Executable::artifact_sections() gives them; loading hands
// them back through CompileOptions::loaded.
struct TargetSection {
  std::string name;
  std::vector<std::span<const uint8_t>> pieces;
  std::shared_ptr<const void> owner;
  // A section of one piece that owns `bytes`.
  static TargetSection of(std::string name, std::vector<uint8_t> bytes) {
    auto held = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    return {std::move(name), {std::span<const uint8_t>(*held)}, held};
  }
};

// The target sections of an artifact being loaded, in place in its bytes (alive while `owner`
// is); a target ignores sections it does not know.
struct LoadedSections {
  std::string artifact;        // the file, for messages
  std::string recompile_hint;  // "recompile it with: kiln compile ..."
  std::span<const uint8_t> file;
  // `file` is a read-only file mapping: its pages may be released (release_file_pages) once read.
  bool mapped = false;
  std::vector<std::pair<std::string, std::span<const uint8_t>>> sections;
  std::shared_ptr<const void> owner;
  // The section called `name`, or nullptr when the artifact has none.
  const std::span<const uint8_t>* find(std::string_view name) const {
    for (const auto& [n, bytes] : sections) {
      if (n == name) return &bytes;
    }
    return nullptr;
  }
};

struct CompileOptions {
  // Run the target's optimization passes (off: the graph runs as imported).
  bool optimize = true;
  // Seed of the random generator that random ops (Bernoulli, RandomUniform, ...) draw from.
  uint64_t seed = 0;
  // Intra-op threads of each run (targets that run ops in parallel); 0: the physical cores.
  int threads = 0;
  // Set when finalizing a loaded artifact: its target sections (Executable::artifact_sections()
  // of the executable it was saved from); the target uses what still applies here (the cuda
  // target: its tuning, on the same GPU and libraries). Not stored in the header.
  std::shared_ptr<const LoadedSections> loaded;
};

// The time one step of a run took: a node, a group of fused nodes, or a layout reorder.
struct StepTime {
  std::string node;  // the (first) node it ran, as Node::describe() writes it
  std::string kind;  // what ran: "Conv", "Conv+Add+Relu", "Reorder", ...
  double ms = 0;
  // What ran it, where the target says: "onednn" (a primitive), "reorder" (a layout change),
  // "kiln" (kiln's own kernel), "ref" (the reference kernel), "node" (the node alone as a program,
  // around a ref step), "cuda" (a step on the GPU); empty where the target does not say.
  std::string runs_on;
};

// Per-step times of one run, in execution order.
struct RunProfile {
  std::vector<StepTime> steps;
};

// The least and greatest value of one output of a run (NaNs left out), and how many elements
// it has; count 0 for an output that is not a float tensor.
struct OutputRange {
  double min = 0;
  double max = 0;
  int64_t count = 0;
};

// A compiled model: immutable and shareable; run() may be called from several threads at once.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual std::string_view target() const = 0;
  // The graph it was compiled from (after the target's passes).
  virtual const Graph& graph() const = 0;
  // One argument per graph input, in order; returns one per graph output.
  virtual Result<std::vector<Argument>> run(std::vector<Argument> inputs) const = 0;
  // run(), recording the time of each step in `profile` (cleared first). Executables that do not
  // time their steps leave it empty.
  virtual Result<std::vector<Argument>> run_profiled(std::vector<Argument> inputs,
                                                     RunProfile& profile) const {
    profile.steps.clear();
    return run(std::move(inputs));
  }
  // run() on arguments already in the target device's memory (the cuda target: GPU pointers, e.g.
  // from gpu_alloc() or a framework's tensors): inputs[i] holds graph input i (its dtype and static
  // shape, contiguous), outputs[i] receives output i; returns once they are written. Targets that
  // run on host memory say so.
  virtual Status run_device(const std::vector<const void*>& inputs,
                            const std::vector<void*>& outputs) const {
    (void)inputs;
    (void)outputs;
    return unimplemented_error(
        std::string("target ") + std::string(target()) +
        " runs on host memory: pass host tensors to run() (device-resident arguments are a cuda "
        "target feature)");
  }
  // run(), returning each output's range instead of its values: what int8 calibration's max
  // method reads of every activation. By default run() and a pass over the host tensors; the
  // cuda target reduces on the GPU and copies two numbers an output.
  virtual Result<std::vector<OutputRange>> run_ranges(std::vector<Argument> inputs) const;
  // A host tensor (uninitialized) that run() reads fastest as an input: page-locked memory the
  // cuda target copies to the GPU straight from, without staging it; Tensor::allocate elsewhere.
  // For callers that fill an input buffer per run and keep it for the next (a server's batches).
  virtual Result<Tensor> host_tensor(DType dtype, Shape shape) const {
    return Tensor::allocate(dtype, std::move(shape));
  }
  // What an artifact of this executable stores beside its graph (the cuda target: its tuning).
  virtual std::vector<TargetSection> artifact_sections() const { return {}; }
  // graph() with the value of every constant: what an artifact stores. A target that drops
  // constants it holds in another form (the cpu target's packed weights) restores them here.
  virtual Result<std::shared_ptr<const Graph>> graph_with_constants() const {
    return std::shared_ptr<const Graph>(std::shared_ptr<const Graph>(), &graph());
  }
  // What an artifact of this executable stores: its graph with the bytes of every constant, and
  // its sections. By default graph_with_constants() and artifact_sections(); a target that holds
  // constants in another form (the cpu target's packed weights) may store them in that form and
  // list them in a section of its own.
  struct ArtifactContents {
    std::shared_ptr<const Graph> graph;
    std::vector<TargetSection> sections;
  };
  virtual Result<ArtifactContents> artifact_contents() const {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> graph, graph_with_constants());
    return ArtifactContents{std::move(graph), artifact_sections()};
  }
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string_view name() const = 0;
  // Whether this target can run `node` (the ref target runs every op).
  virtual bool supports(const Node& node) const = 0;
  // The target's optimization pipeline, in order.
  virtual std::vector<std::unique_ptr<Pass>> passes(const CompileOptions& options) const = 0;
  // Turns an optimized graph into an executable.
  virtual Result<std::shared_ptr<Executable>> finalize(std::shared_ptr<Graph> graph,
                                                       const CompileOptions& options) const = 0;
  // Turns the constants of `graph`, a loaded artifact's graph as stored (`loaded` its sections),
  // into plain values for any other reader (ref, printing): a target that stores constants in
  // layouts of its own (the cpu target's packed weights) unpacks them. finalize() takes the graph
  // as stored.
  virtual Status unpack_stored_constants(Graph& graph, const LoadedSections& loaded) const {
    (void)graph;
    (void)loaded;
    return Status();
  }
};

// Checks run() arguments against the graph's inputs: their number, kind, dtype, rank and every
// known dim. Errors name the input and show the expected and the given type.
Status check_inputs(const Graph& graph, const std::vector<Argument>& inputs);

// The names of the targets this build has: "ref", and "cpu"/"cuda" when built.
std::vector<std::string> target_names();
// The target called `name`, or a not-found error listing the available ones.
Result<std::unique_ptr<Target>> make_target(std::string_view name);

// How many devices `name` can run on: the GPUs for "cuda", 1 for the host targets.
int device_count(std::string_view name);
// Makes device `device` of target `name` (cuda: a GPU index) the calling thread's, so that what
// the thread compiles or loads next for that target lives on it; an executable then runs there
// whichever thread calls it. Returns the device that was the thread's. Host targets have device 0
// only; an index past the last device is an invalid-argument error naming the count.
Result<int> use_device(std::string_view name, int device);

// Runs the target's passes over `graph` (unless options.optimize is false) and finalizes it.
// Fails naming the first node the target does not support.
Result<std::shared_ptr<Executable>> compile(std::shared_ptr<Graph> graph, const Target& target,
                                            const CompileOptions& options = {});

}  // namespace kiln::compiler
