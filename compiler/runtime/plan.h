// SPDX-License-Identifier: Apache-2.0
// The planned-program core the cpu and cuda targets share: buffers with liveness, steps that read
// and write them, the state a builder keeps while it lowers a graph, the arena plan, and the ref
// fallback step's work. A target adds what is its own: where buffers live (layouts, device memory),
// how steps run (streams, primitives), and which lowering rules it tries for each node.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/memory_plan.h"
#include "core/status.h"

namespace kiln::compiler::ref {
class Interpreter;
class NodeKernel;
}  // namespace kiln::compiler::ref

namespace kiln::compiler::runtime {

// A tensor's place in a planned program: its type and size, and the steps between which it is
// live (-1 until a step uses it).
struct PlannedBuffer {
  DType dtype = DType::kF32;
  Shape shape;
  size_t bytes = 0;
  int first = -1;  // the step that writes it
  int last = -1;   // the last step that reads it

  // Step `step` reads or writes it.
  void live_at(int step) {
    if (first < 0) first = step;
    last = std::max(last, step);
  }
};

// What every step carries, whatever runs it: the node (for profiles and errors), its kind as
// profiles show it, and the buffers it reads and writes (which make their liveness).
struct PlannedStep {
  const Node* node = nullptr;
  std::string kind;
  std::vector<int> reads;
  std::vector<int> writes;
};

// The bytes `shape` elements of `dtype` take (as a Tensor stores them: one per byte for 4 and
// 2-bit types).
size_t byte_size(DType dtype, const Shape& shape);

// Why `graph` cannot run as a planned program -- a value that is not a static tensor, a string
// tensor, a node with subgraphs (but If nodes, where `if_nodes` is true: a target that plans
// their branches) -- naming the value or node; empty when it can.
std::string why_not_plannable(const Graph& graph, bool if_nodes = false);

// The steps in `steps` of kind `kind`.
template <class Step>
int count_steps(const std::vector<std::unique_ptr<Step>>& steps, std::string_view kind) {
  return static_cast<int>(
      std::count_if(steps.begin(), steps.end(), [&](const auto& s) { return s->kind == kind; }));
}

// One input or output of a ref fallback step: its buffer (-1 for an omitted input) and type.
struct RefSlot {
  int buffer = -1;
  DType dtype = DType::kF32;
  Shape shape;
  size_t bytes = 0;
};

// Runs `node` on the host as a ref fallback step: `kernel` (a kernel-table kernel; null runs the
// ref kernel, over outputs zeroed first) with input i at `in[i]` and output i at `out[i]`. An
// output the kernel set anew rather than writing in place is copied in; one whose type differs
// from the compiled `outputs[i]` is an internal error naming the node.
Status run_ref_step(const Node& node, const ref::NodeKernel* kernel, ref::Interpreter* interpreter,
                    std::span<const RefSlot> inputs, std::span<void* const> in,
                    std::span<const RefSlot> outputs, std::span<void* const> out);

// What every planned program holds once built: its buffers, its steps, the buffer of each graph
// output and the arena plan (offsets per buffer; only arena buffers' are used). A target's Program
// derives from it and adds how steps run and where buffers live while they do.
template <class Buffer, class Step>
class PlannedProgram {
 public:
  // The arena's bytes, and the bytes of every arena buffer added up (its size without reuse).
  size_t arena_bytes() const { return plan_.arena_bytes; }
  size_t unplanned_bytes() const { return plan_.total_bytes; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const std::vector<size_t>& offsets() const { return plan_.offsets; }
  const std::vector<std::unique_ptr<Step>>& steps() const { return steps_; }
  int count_steps(std::string_view kind) const { return runtime::count_steps(steps_, kind); }

 protected:
  PlannedProgram(std::vector<Buffer> buffers, std::vector<std::unique_ptr<Step>> steps,
                 std::vector<int> outputs, MemoryPlan plan)
      : buffers_(std::move(buffers)),
        steps_(std::move(steps)),
        outputs_(std::move(outputs)),
        plan_(std::move(plan)) {}

  std::vector<Buffer> buffers_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<int> outputs_;  // the buffer of each graph output
  MemoryPlan plan_;
};

// The state a target's builder keeps while it lowers a graph: the buffers, the steps, the buffer
// of each value, and the nodes a step already computes. `Buffer` derives from PlannedBuffer and
// `Step` from PlannedStep.
template <class Buffer, class Step>
class PlanBuilder {
 public:
  explicit PlanBuilder(const Graph& graph) : graph_(graph) {}

  const Graph& graph() const { return graph_; }
  const Buffer& buffer(int id) const { return buffers_[static_cast<size_t>(id)]; }
  // Whether `v` has a buffer yet (a graph input, a constant, or the output of a lowered node).
  bool has_buffer(const Value* v) const { return value_buffers_.count(v) != 0; }
  // Marks a node as computed by a step already added (its outputs are defined by that step).
  void mark_fused(const Node* node) { fused_.insert(node); }
  bool is_fused(const Node* node) const { return fused_.count(node) != 0; }
  int step_count() const { return static_cast<int>(steps_.size()); }

 protected:
  int add_buffer(Buffer b) {
    buffers_.push_back(std::move(b));
    return static_cast<int>(buffers_.size()) - 1;
  }
  // Appends `step`; the buffers it reads and writes -- each as `owner(id)` names it (a view's
  // reads keep the buffer it views alive) -- are live at it.
  template <class Owner>
  void append_step(std::unique_ptr<Step> step, Owner owner) {
    const int index = step_count();
    for (int id : step->writes) buffers_[static_cast<size_t>(owner(id))].live_at(index);
    for (int id : step->reads) buffers_[static_cast<size_t>(owner(id))].live_at(index);
    steps_.push_back(std::move(step));
  }
  // The arena plan of the buffers, each taking `lifetime(b)` (its arena bytes, 0 outside the
  // arena, and its steps); `inputs` are written before the first step and `outputs` read after
  // the last.
  template <class Lifetime>
  MemoryPlan plan_arena(std::span<const int> inputs, std::span<const int> outputs, size_t alignment,
                        Lifetime lifetime) const {
    std::vector<BufferLifetime> lifetimes;
    lifetimes.reserve(buffers_.size());
    for (const Buffer& b : buffers_) lifetimes.push_back(lifetime(b));
    for (int id : inputs) lifetimes[static_cast<size_t>(id)].first = 0;
    for (int id : outputs) lifetimes[static_cast<size_t>(id)].last = step_count();
    return plan_memory(lifetimes, alignment);
  }

  const Graph& graph_;
  std::vector<Buffer> buffers_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::unordered_map<const Value*, int> value_buffers_;
  std::unordered_set<const Node*> fused_;
};

}  // namespace kiln::compiler::runtime
