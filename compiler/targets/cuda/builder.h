// SPDX-License-Identifier: Apache-2.0
// Lowering a graph to the cuda target's Program: the builder's state and the helpers lowering rules
// use (lowering.h), and the entry points build() calls (lower.cc, attention.cc, lower_util.cc).
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/plan.h"
#include "compiler/targets/cuda/program.h"
#include "compiler/targets/cuda/tuning.h"

namespace kiln::compiler::cuda {

// Lowers a graph to a Program: device steps where lower_device() takes a node, a host ref step
// (copy out, ref kernel, copy in) for every other node.
class Builder : public runtime::PlanBuilder<Buffer, Step> {
 public:
  // Where the algorithm choices come from and go: `stored` (a loaded artifact's, for this GPU; may
  // be null) is used without measuring; every choice made is recorded in `found` (the new
  // executable's, kept in its artifacts); `progress` counts the problems measured.
  struct Tuner {
    const Tuning* stored = nullptr;
    Tuning* found = nullptr;
    TuningProgress* progress = nullptr;
  };
  Builder(const Graph& graph, uint64_t seed, cudnnHandle_t cudnn, cublasLtHandle_t lt, Tuner tuner)
      : PlanBuilder(graph), seed_(seed), cudnn_(cudnn), lt_(lt), tuner_(tuner) {}

  // nullptr when the graph cannot be planned (dynamic shapes, non-tensor values, strings,
  // subgraphs): the executable then runs the ref interpreter.
  Result<std::unique_ptr<Program>> build();

  // ---- for the lowering functions (lowering.h) ----
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasLtHandle_t lt() const { return lt_; }
  // `v`'s buffer in the plain (NCHW, row-major) layout: a 4-D value stored NHWC gets one reorder
  // step into a plain copy, shared by every later reader.
  int buffer_of(const Value* v);
  // `v`'s buffer stored NHWC (a 4-D value): a plain one gets one reorder step into an NHWC copy.
  int buffer_nhwc(const Value* v);
  // `v`'s buffer in whatever layout it has (for elementwise ops, which keep it).
  int stored_buffer(const Value* v) const;
  bool is_nhwc(const Value* v) const { return buffer(stored_buffer(v)).nhwc; }
  // Whether convolutions of `dtype` run NHWC (KILN_CUDA_LAYOUT: auto is f16/bf16 only).
  static bool nhwc_convolutions(DType dtype);
  // The node being lowered (reorder steps it causes are attributed to it).
  const Node& current() const { return *current_; }
  // A new arena buffer for `v` (stored NHWC when `nhwc`), written by the next step.
  int define(const Value* v, bool nhwc = false);
  // A new arena buffer holding no graph value (a channel-padded copy), written by the next step.
  int scratch(DType dtype, Shape shape, bool nhwc);
  // `v` shares the buffer of `source` (a reshape: same bytes, another shape).
  void alias(const Value* v, const Value* source) { value_buffers_[v] = buffer_of(source); }
  // A new buffer `b` (arena or constant), `v`'s when `v` is not null.
  int define_buffer(const Value* v, Buffer b);
  // A constant buffer of compile-time data (f32).
  int constant(std::vector<float> values);
  // A constant buffer of compile-time bytes of any dtype and shape.
  int constant_bytes(DType dtype, Shape shape, std::vector<uint8_t> bytes);
  void add_step(std::unique_ptr<Step> step);
  void need_workspace(size_t bytes) { workspace_bytes_ = std::max(workspace_bytes_, bytes); }
  // The only node reading `v` when `v` is not a graph output, else nullptr.
  const Node* only_consumer(const Value* v) const;
  // The choice for problem `key` made earlier in this compile or stored for this GPU, or nullptr.
  const std::vector<uint8_t>* known_choice(const std::string& key) const;
  // Records the choice for `key` (a progress step); `measured` when it was timed now.
  void record_choice(const std::string& key, std::vector<uint8_t> bytes, bool measured);

 private:
  void add_host_step(const Node& node);

  uint64_t seed_;
  cudnnHandle_t cudnn_;
  cublasLtHandle_t lt_;
  Tuner tuner_;
  std::unordered_map<const Value*, int> plain_copies_;  // NCHW copies of NHWC-stored values
  std::unordered_map<const Value*, int> nhwc_copies_;   // NHWC copies of plain values
  const Node* current_ = nullptr;
  size_t workspace_bytes_ = 0;
  size_t host_step_bytes_ = 0;
};

// Lowers `node` (and a following node it fuses with) to device steps when it can; false leaves it
// to a host ref step. Defined in lower.cc.
Result<bool> lower_device(Builder& builder, const Node& node);

// Marks the nodes of every attention subgraph the fused attention step takes as fused, all but
// the one whose lowering adds the step (lower_attention); called before any node is lowered.
// Returns how many it found (none with KILN_CUDA_ATTENTION=0). Defined in attention.cc.
int plan_attention(Builder& builder);

// Adds a step copying 4-D buffer `from` into `to` (logical NCHW `shape`), NCHW to NHWC when
// `to_nhwc`, else back. Defined in lower_util.cc.
void add_reorder(Builder& builder, int from, int to, const Shape& shape, bool to_nhwc);

}  // namespace kiln::compiler::cuda
